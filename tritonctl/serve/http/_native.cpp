// The HTTP/1.1 transport of `tritonctl serve`, in C++ over libevent's evhttp (the library under
// Triton's own HTTP front end): connections, parsing, keep-alive, chunked bodies and
// `Expect: 100-continue` run on one thread of their own without the GIL, and Python sees whole
// requests. Requests go into one queue whose eventfd the server's event loop watches, so a burst
// of requests costs the loop one wake-up. A reply may be sent from any thread (Request.finish):
// it is queued and written by the transport's thread. A reply may also be streamed
// (Request.start, write, end: chunked transfer coding, each part sent as it comes, as Triton's
// generate_stream sends Server-Sent Events). A client that closes its connection while its request
// is in flight, or while its streamed reply is being written, shows up as a CANCEL event, so the
// request can be dropped unrun or stopped.
//
// Where the server forwards headers as request parameters (keep_sent_headers), a request also
// keeps its headers as the client sent them: names in the client's spelling, and values with
// the trailing spaces and tabs that evhttp's parser trims (Triton's libevhtp keeps them, and so
// a forwarded value arrives whole). evhttp gives no access to the raw header lines, so each
// connection's input buffer is watched (RawHeaderLines) as bytes arrive, before evhttp parses
// them.

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "event_queue.h"
#include "http/over_limit.h"

namespace py = pybind11;

namespace {

enum EventKind { kRequest = 0, kCancel = 1 };

class Server;

// One request. The transport's thread owns `req` and `watch`; Python reads the rest.
struct RequestState {
  Server* server = nullptr;      // for the transport's thread
  std::weak_ptr<Server> owner;   // for Python, which may answer after the server is gone
  evhttp_request* req = nullptr;  // null once answered, or once the server is gone
  event* watch = nullptr;         // the client closing its connection while we work
  std::string method;
  std::string path;
  std::string query;
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  // The same headers as the client sent them (name spelling, value's trailing whitespace), where
  // the server keeps them.
  std::vector<std::pair<std::string, std::string>> sent;
  evbuffer* body = nullptr;  // taken by Python once
  bool finished = false;     // a whole reply, or a streamed reply's end, was queued (the reply mutex)
  bool streaming = false;    // a streamed reply was started (the reply mutex)
  ~RequestState() {
    if (body != nullptr) evbuffer_free(body);
  }
};

struct Event {
  EventKind kind;
  std::shared_ptr<RequestState> request;
};

// What a reply does: the whole reply at once, or a streamed reply's head, one part, or its end.
enum ReplyKind { kWhole = 0, kStart = 1, kPart = 2, kEnd = 3 };

struct Reply {
  std::shared_ptr<RequestState> request;
  int status;
  std::string reason;
  std::vector<std::pair<std::string, std::string>> headers;
  evbuffer* body;
  ReplyKind kind = kWhole;
};

std::string Lower(const char* text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// A header line whose value ends in whitespace, as it arrived, before evhttp trims it.
struct RawHeader {
  std::string name;     // in lower case
  std::string trimmed;  // the value as evhttp keeps it
  std::string sent;     // the value as sent
};

// What a connection's input showed of its next request's header block, noted as bytes arrive
// (Server::OnInput) and taken when evhttp has parsed the request (Server::KeepSentHeaders).
// Lines after the block's empty line are body (or a pipelined request's, which then keeps
// evhttp's trimmed values): not noted.
struct HeaderBlock {
  std::vector<RawHeader> headers;
  bool ended = false;
};

constexpr size_t kMaxRawLine = 8192;        // longer lines are left as evhttp trims them
constexpr size_t kMaxRawHeaders = 64;       // noted per request
constexpr size_t kMaxRawConnections = 4096;  // with a header block being read

// `line` (without its line break) as a header whose value ends in whitespace, else false.
bool ParseRawHeader(const std::string& line, RawHeader* out) {
  if (line.empty() || IsBlank(line[0]) || !IsBlank(line.back())) return false;
  size_t colon = line.find(':');
  if (colon == std::string::npos || colon == 0) return false;
  size_t start = colon + 1;
  while (start < line.size() && line[start] == ' ') ++start;  // evhttp drops leading spaces only
  size_t end = line.size();
  while (end > start && IsBlank(line[end - 1])) --end;
  out->name = Lower(line.substr(0, colon).c_str());
  out->trimmed = line.substr(start, end - start);
  out->sent = line.substr(start);
  return true;
}

// evhttp 2.1 gives a method it does not know this type (EVHTTP_REQ_UNKNOWN_, not in its public headers).
constexpr ev_uint16_t kUnknownMethod = 1 << 15;
constexpr ev_uint16_t kEveryMethod = EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
                                     EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                     EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH | kUnknownMethod;

const char* MethodName(evhttp_cmd_type command) {
  switch (command) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_TRACE: return "TRACE";
    case EVHTTP_REQ_CONNECT: return "CONNECT";
    case EVHTTP_REQ_PATCH: return "PATCH";
  }
  return "UNKNOWN";
}

// evhttp gives the reply to a CONNECT no Content-Length (it expects a tunnel, and keeps the
// connection open): the reply says where its body ends, or the client would wait for a close.
void AddConnectLength(evhttp_request* req, evbuffer* body) {
  if (evhttp_request_get_command(req) != EVHTTP_REQ_CONNECT) return;
  evkeyvalq* out = evhttp_request_get_output_headers(req);
  if (evhttp_find_header(out, "Content-Length") != nullptr) return;
  size_t length = body == nullptr ? 0 : evbuffer_get_length(body);
  evhttp_add_header(out, "Content-Length", std::to_string(length).c_str());
}

// evhttp reads no body for TRACE, HEAD or a method it does not know: a body such a request
// declares is still on the connection, and would be read as the next request. The connection
// closes after the reply instead.
void CloseIfBodyUnread(evhttp_request* req) {
  evhttp_cmd_type command = evhttp_request_get_command(req);
  if (command != EVHTTP_REQ_TRACE && command != EVHTTP_REQ_HEAD && command != kUnknownMethod) return;
  evkeyvalq* in = evhttp_request_get_input_headers(req);
  const char* length = evhttp_find_header(in, "Content-Length");
  bool declares_body = evhttp_find_header(in, "Transfer-Encoding") != nullptr ||
                       (length != nullptr && std::strtoull(length, nullptr, 10) != 0);
  if (declares_body) evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
}

class Server : public std::enable_shared_from_this<Server> {
 public:
  Server(const std::string& host, int port, int64_t max_body_bytes, bool keep_sent_headers)
      : keep_sent_headers_(keep_sent_headers) {
    static std::once_flag threads_ready;
    std::call_once(threads_ready, [] { evthread_use_pthreads(); });
    base_ = event_base_new();
    http_ = base_ == nullptr ? nullptr : evhttp_new(base_);
    if (http_ == nullptr) {
      Free();
      throw std::runtime_error("cannot create the HTTP server");
    }
    over_limit_ = std::make_unique<OverLimitAnswers>(http_, max_body_bytes);
    // A body over the limit is read to its end before the refusal goes out, so the client sees it.
    evhttp_set_flags(http_, EVHTTP_SERVER_LINGERING_CLOSE);
    // Every method reaches the router, as in Triton: a route it does not serve is 405 (JSON),
    // an unknown path 404; evhttp itself would answer 501 in HTML.
    evhttp_set_allowed_methods(http_, kEveryMethod);
    evhttp_set_timeout(http_, 30);  // idle keep-alive connections, as uvicorn's default
    evhttp_set_default_content_type(http_, nullptr);  // a reply without a body has no type
    evhttp_set_gencb(http_, &Server::OnRequest, this);
    if (keep_sent_headers_) evhttp_set_bevcb(http_, &Server::NewConnection, this);
    socket_ = evhttp_bind_socket_with_handle(http_, host.c_str(), static_cast<uint16_t>(port));
    if (socket_ == nullptr) {
      Free();
      throw std::runtime_error("cannot bind the HTTP port at " + host + ":" + std::to_string(port));
    }
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    getsockname(evhttp_bound_socket_get_fd(socket_), reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&address)->sin6_port
                                                : reinterpret_cast<sockaddr_in*>(&address)->sin_port);
    wake_ = event_new(base_, -1, EV_PERSIST, &Server::OnWake, this);
    event_add(wake_, nullptr);
    thread_ = std::thread([this] { event_base_loop(base_, EVLOOP_NO_EXIT_ON_EMPTY); });
  }

  ~Server() {
    Stop(0.0);
  }

  int port() const { return port_; }
  int fd() const { return events_.fd(); }
  EventQueue<Event>& events() { return events_; }

  // From any thread: queue the reply (or a step of a streamed one); the transport's thread writes
  // it. A whole reply or a start is taken once per request, parts and the end only after a start.
  void Send(Reply reply) {
    {
      std::lock_guard<std::mutex> lock(reply_mu_);
      RequestState* state = reply.request.get();
      bool in_order = reply.kind == kWhole || reply.kind == kStart ? !state->streaming : state->streaming;
      if (state->finished || stopped_ || !in_order) {
        evbuffer_free(reply.body);
        return;
      }
      if (reply.kind == kStart) state->streaming = true;
      if (reply.kind == kWhole || reply.kind == kEnd) state->finished = true;
      replies_.push_back(std::move(reply));
    }
    event_active(wake_, EV_READ, 0);
  }

  // Stops accepting; waits up to `grace_s` for the requests in flight to be answered and their
  // replies written out, then closes every connection. Blocks: call it off the event loop,
  // which must keep answering.
  void Stop(double grace_s) {
    if (!thread_.joinable()) return;
    event_base_once(base_, -1, EV_TIMEOUT, &Server::OnStopAccepting, this, nullptr);
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::microseconds(static_cast<int64_t>(grace_s * 1e6));
    {
      std::unique_lock<std::mutex> lock(reply_mu_);
      drained_.wait_until(lock, deadline, [this] { return answered_ == received_ && replies_.empty(); });
      stopped_ = true;
      for (Reply& reply : replies_) evbuffer_free(reply.body);
      replies_.clear();
    }
    event_base_loopbreak(base_);
    thread_.join();
    for (auto& entry : in_flight_) {  // never answered: evhttp_free closes their connections
      RequestState* state = entry.second.get();
      if (state->watch != nullptr) event_free(state->watch);
      state->watch = nullptr;
      evhttp_connection* connection = state->req == nullptr ? nullptr : evhttp_request_get_connection(state->req);
      if (connection != nullptr) evhttp_connection_set_closecb(connection, nullptr, nullptr);  // a stream's
      state->req = nullptr;
    }
    in_flight_.clear();
    Free();
  }

 private:
  void Free() {
    if (wake_ != nullptr) event_free(wake_);
    if (http_ != nullptr) evhttp_free(http_);
    over_limit_.reset();  // after its connections are gone
    if (base_ != nullptr) event_base_free(base_);
    wake_ = nullptr;
    http_ = nullptr;
    base_ = nullptr;
  }

  static void OnStopAccepting(evutil_socket_t, short, void* arg) {
    auto* self = static_cast<Server*>(arg);
    if (self->socket_ != nullptr) evhttp_del_accept_socket(self->http_, self->socket_);
    self->socket_ = nullptr;
  }

  static void OnRequest(evhttp_request* req, void* arg) {
    auto* self = static_cast<Server*>(arg);
    if (!self->over_limit_->HandedOver(req)) {  // refused as not HTTP; the connection closes
      evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain; charset=utf-8");
      evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
      evbuffer_add_printf(evhttp_request_get_output_buffer(req), "%s", OverLimitAnswers::kNotHttp);
      evhttp_send_reply(req, 400, "Bad Request", nullptr);
      return;
    }
    auto state = std::make_shared<RequestState>();
    state->server = self;
    state->owner = self->weak_from_this();
    state->req = req;
    state->method = MethodName(evhttp_request_get_command(req));
    const evhttp_uri* uri = evhttp_request_get_evhttp_uri(req);
    const char* path = uri == nullptr ? nullptr : evhttp_uri_get_path(uri);
    const char* query = uri == nullptr ? nullptr : evhttp_uri_get_query(uri);
    state->path = path != nullptr && *path != '\0' ? path : "/";
    state->query = query != nullptr ? query : "";
    evkeyvalq* headers = evhttp_request_get_input_headers(req);
    for (evkeyval* header = headers->tqh_first; header != nullptr; header = header->next.tqe_next) {
      state->headers.emplace_back(Lower(header->key), header->value);
    }
    if (self->keep_sent_headers_) self->KeepSentHeaders(req, headers, state.get());
    state->body = evbuffer_new();
    evbuffer_add_buffer(state->body, evhttp_request_get_input_buffer(req));  // moves, no copy
    // Watch the connection for the client going away while the request is in flight.
    evhttp_connection* connection = evhttp_request_get_connection(req);
    bufferevent* stream = connection == nullptr ? nullptr : evhttp_connection_get_bufferevent(connection);
    evutil_socket_t socket = stream == nullptr ? -1 : bufferevent_getfd(stream);
    if (socket >= 0) {
      state->watch = event_new(self->base_, socket, EV_CLOSED, &Server::OnClosed, state.get());
      event_add(state->watch, nullptr);
    }
    self->in_flight_.emplace(state.get(), state);
    {
      std::lock_guard<std::mutex> lock(self->reply_mu_);
      ++self->received_;
    }
    self->events_.Push({kRequest, std::move(state)});
  }

  // A connection's bufferevent, as evhttp makes it (no options), with its input watched.
  static bufferevent* NewConnection(event_base* base, void* arg) {
    auto* self = static_cast<Server*>(arg);
    bufferevent* stream = bufferevent_socket_new(base, -1, 0);
    if (stream != nullptr) {
      evbuffer* input = bufferevent_get_input(stream);
      self->header_blocks_.erase(input);  // a freed connection's buffer at the same address
      evbuffer_add_cb(input, &Server::OnInput, self);
    }
    return stream;
  }

  // Bytes added to a connection's input, before evhttp reads them: each line of the header
  // block that ends among them and whose value ends in whitespace is noted for the request.
  static void OnInput(evbuffer* input, const evbuffer_cb_info* info, void* arg) {
    if (info->n_added == 0) return;
    auto* self = static_cast<Server*>(arg);
    HeaderBlock* block = nullptr;  // looked up once the first line ends
    size_t begin = info->orig_size;
    size_t end = begin + info->n_added;
    // The line that goes on into the new bytes started after the last line break before them
    // (evhttp drains whole lines as they come, so what precedes the new bytes is short).
    size_t from = begin > kMaxRawLine ? begin - kMaxRawLine : 0;
    size_t line_start = from;
    evbuffer_ptr at;
    evbuffer_ptr_set(input, &at, from, EVBUFFER_PTR_SET);
    while (true) {
      evbuffer_ptr found = evbuffer_search_range(input, "\n", 1, &at, nullptr);
      if (found.pos < 0 || static_cast<size_t>(found.pos) >= end) break;
      size_t newline = static_cast<size_t>(found.pos);
      if (newline >= begin) {
        if (block == nullptr) block = self->Block(input);
        if (block->ended) return;  // the body: nothing more to note until the request is parsed
        self->NoteLine(input, line_start, newline, block);
      }
      line_start = newline + 1;
      if (evbuffer_ptr_set(input, &at, line_start, EVBUFFER_PTR_SET) != 0) break;
    }
  }

  HeaderBlock* Block(evbuffer* input) {
    auto found = header_blocks_.find(input);
    if (found != header_blocks_.end()) return &found->second;
    if (header_blocks_.size() >= kMaxRawConnections) {
      header_blocks_.clear();  // connections gone in the middle of a request: forget them all
    }
    return &header_blocks_[input];
  }

  void NoteLine(evbuffer* input, size_t start, size_t newline, HeaderBlock* block) {
    size_t length = newline - start;  // without the \n
    char last[2] = {0, 0};
    evbuffer_ptr at;
    if (length > 0) {
      size_t tail = length >= 2 ? 2 : 1;
      evbuffer_ptr_set(input, &at, newline - tail, EVBUFFER_PTR_SET);
      evbuffer_copyout_from(input, &at, last + 2 - tail, tail);
    }
    if (last[1] == '\r') length -= 1;
    if (length == 0) {  // the empty line that ends the header block
      block->ended = true;
      return;
    }
    char tail = last[1] == '\r' ? last[0] : last[1];
    if (!IsBlank(tail) || length > kMaxRawLine || block->headers.size() >= kMaxRawHeaders) return;
    std::string line(length, '\0');
    evbuffer_ptr_set(input, &at, start, EVBUFFER_PTR_SET);
    evbuffer_copyout_from(input, &at, &line[0], length);
    RawHeader header;
    if (ParseRawHeader(line, &header)) block->headers.push_back(std::move(header));
  }

  // The request's headers as sent: names as the client spelled them, values with the trailing
  // whitespace evhttp trimmed, from the lines noted on its connection (which it takes).
  void KeepSentHeaders(evhttp_request* req, evkeyvalq* headers, RequestState* state) {
    std::vector<RawHeader> noted;
    evhttp_connection* connection = evhttp_request_get_connection(req);
    bufferevent* stream = connection == nullptr ? nullptr : evhttp_connection_get_bufferevent(connection);
    if (stream != nullptr) {
      auto found = header_blocks_.find(bufferevent_get_input(stream));
      if (found != header_blocks_.end()) {
        noted.swap(found->second.headers);
        header_blocks_.erase(found);  // the connection's next request starts a new block
      }
    }
    size_t index = 0;
    for (evkeyval* header = headers->tqh_first; header != nullptr; header = header->next.tqe_next, ++index) {
      std::string value = header->value;
      for (RawHeader& raw : noted) {
        if (!raw.name.empty() && raw.name == state->headers[index].first && raw.trimmed == value) {
          value = raw.sent;
          raw.name.clear();  // used once
          break;
        }
      }
      state->sent.emplace_back(header->key, std::move(value));
    }
  }

  static void OnClosed(evutil_socket_t, short, void* arg) {
    auto* state = static_cast<RequestState*>(arg);
    Server* self = state->server;
    auto found = self->in_flight_.find(state);
    if (found == self->in_flight_.end()) return;
    event_free(state->watch);
    state->watch = nullptr;
    self->events_.Push({kCancel, found->second});
  }

  static void OnWake(evutil_socket_t, short, void* arg) {
    auto* self = static_cast<Server*>(arg);
    std::vector<Reply> replies;
    {
      std::lock_guard<std::mutex> lock(self->reply_mu_);
      replies.swap(self->replies_);
    }
    uint64_t answered = 0;  // replies with no connection left to write them to
    for (Reply& reply : replies) {
      switch (reply.kind) {
        case kStart: self->StartStream(reply); break;
        case kPart: WritePart(reply); break;
        case kWhole:
        case kEnd: answered += self->Finish(reply); break;
      }
      evbuffer_free(reply.body);
    }
    if (answered != 0) self->Answered(answered);
  }

  // The head of a streamed reply (chunked where the client speaks HTTP/1.1); the connection stays
  // watched for the client going away until the reply ends.
  void StartStream(Reply& reply) {
    RequestState* state = reply.request.get();
    if (state->req == nullptr || evhttp_request_get_connection(state->req) == nullptr) return;
    AddHeaders(state->req, reply);
    // evhttp may find the client gone (a failed write) before the watch does: told either way.
    evhttp_connection_set_closecb(evhttp_request_get_connection(state->req), &Server::OnConnectionClosed, state);
    evhttp_send_reply_start(state->req, reply.status, reply.reason.c_str());
  }

  static void OnConnectionClosed(evhttp_connection*, void* arg) {
    auto* state = static_cast<RequestState*>(arg);
    if (state->watch != nullptr) OnClosed(-1, 0, state);  // else the watch has told already
  }

  static void WritePart(Reply& reply) {
    evhttp_request* req = reply.request->req;
    if (req != nullptr && evhttp_request_get_connection(req) != nullptr) evhttp_send_reply_chunk(req, reply.body);
  }

  // A whole reply, or a streamed reply's end: the request is done. Returns 1 where no connection
  // is left to write to (counted as answered at once), else 0 (counted once written out, OnSent).
  uint64_t Finish(Reply& reply) {
    RequestState* state = reply.request.get();
    if (state->watch != nullptr) event_free(state->watch);
    state->watch = nullptr;
    evhttp_request* req = state->req;
    state->req = nullptr;
    in_flight_.erase(state);
    bool connected = req != nullptr && evhttp_request_get_connection(req) != nullptr;
    if (reply.kind == kEnd) {
      if (req == nullptr) return 1;
      if (connected) evhttp_connection_set_closecb(evhttp_request_get_connection(req), nullptr, nullptr);
      // Counted as answered once written out (OnSent), so a stop never cuts a reply short.
      if (connected) evhttp_request_set_on_complete_cb(req, &Server::OnSent, this);
      evhttp_send_reply_end(req);  // frees a request whose connection is gone
      return connected ? 0 : 1;
    }
    if (!connected) {
      if (req != nullptr) evhttp_send_reply(req, reply.status, nullptr, nullptr);  // frees it
      return 1;
    }
    AddHeaders(req, reply);
    AddConnectLength(req, reply.body);
    CloseIfBodyUnread(req);
    evhttp_request_set_on_complete_cb(req, &Server::OnSent, this);
    evhttp_send_reply(req, reply.status, reply.reason.c_str(), reply.body);
    return 0;
  }

  static void AddHeaders(evhttp_request* req, const Reply& reply) {
    evkeyvalq* out = evhttp_request_get_output_headers(req);
    for (auto& header : reply.headers) evhttp_add_header(out, header.first.c_str(), header.second.c_str());
  }

  static void OnSent(evhttp_request* req, void* arg) {
    auto* self = static_cast<Server*>(arg);
    self->over_limit_->Replied(req);
    self->Answered(1);
  }

  void Answered(uint64_t count) {
    std::lock_guard<std::mutex> lock(reply_mu_);
    answered_ += count;
    if (answered_ == received_) drained_.notify_all();
  }

  const bool keep_sent_headers_;
  // The header block noted per connection input buffer (transport's thread only).
  std::unordered_map<evbuffer*, HeaderBlock> header_blocks_;
  event_base* base_ = nullptr;
  evhttp* http_ = nullptr;
  evhttp_bound_socket* socket_ = nullptr;
  event* wake_ = nullptr;
  int port_ = 0;
  std::thread thread_;
  EventQueue<Event> events_;
  std::unordered_map<RequestState*, std::shared_ptr<RequestState>> in_flight_;  // transport's thread only
  std::mutex reply_mu_;
  std::condition_variable drained_;
  std::vector<Reply> replies_;
  uint64_t received_ = 0;
  uint64_t answered_ = 0;
  bool stopped_ = false;
  std::unique_ptr<OverLimitAnswers> over_limit_;  // the transport's thread only
};

std::string ToString(py::handle value) {
  if (PyBytes_Check(value.ptr())) return std::string(py::reinterpret_borrow<py::bytes>(value));
  return py::cast<std::string>(value);
}

class Request {
 public:
  explicit Request(std::shared_ptr<RequestState> state) : state_(std::move(state)) {}
  const std::string& method() const { return state_->method; }
  const std::string& path() const { return state_->path; }
  py::bytes query() const { return py::bytes(state_->query); }
  py::list headers() const {
    py::list out;
    for (auto& header : state_->headers) out.append(py::make_tuple(py::bytes(header.first), py::bytes(header.second)));
    return out;
  }
  // The headers as the client sent them; empty unless the server keeps them.
  py::list sent_headers() const {
    py::list out;
    for (auto& header : state_->sent) out.append(py::make_tuple(py::bytes(header.first), py::bytes(header.second)));
    return out;
  }
  // The body, once: later calls give b"".
  py::bytes take_body() {
    evbuffer* body = state_->body;
    if (body == nullptr) return py::bytes();
    state_->body = nullptr;
    size_t length = evbuffer_get_length(body);
    PyObject* bytes = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(length));
    if (bytes == nullptr) {
      evbuffer_free(body);
      throw py::error_already_set();
    }
    evbuffer_remove(body, PyBytes_AS_STRING(bytes), length);
    evbuffer_free(body);
    return py::reinterpret_steal<py::bytes>(bytes);
  }
  // Answer the request, from any thread: `headers` as (name, value) pairs, `body` bytes or a list
  // of buffers sent one after the other. Only the first answer counts.
  void finish(int status, const std::string& reason, py::iterable headers, py::object body) {
    Reply reply{state_, status, reason, Headers(headers), evbuffer_new()};
    AddBody(reply.body, body);
    Send(std::move(reply));
  }
  // A streamed reply, from any thread: its head (no Content-Length: chunked for HTTP/1.1), then
  // parts (`write`), then `end`. Ignored once the request is answered.
  void start(int status, const std::string& reason, py::iterable headers) {
    Reply reply{state_, status, reason, Headers(headers), evbuffer_new(), kStart};
    Send(std::move(reply));
  }
  void write(py::object body) {
    Reply reply{state_, 0, "", {}, evbuffer_new(), kPart};
    AddBody(reply.body, body);
    Send(std::move(reply));
  }
  void end() { Send(Reply{state_, 0, "", {}, evbuffer_new(), kEnd}); }
  bool operator==(const Request& other) const { return state_ == other.state_; }
  size_t hash() const { return std::hash<RequestState*>()(state_.get()); }

 private:
  static std::vector<std::pair<std::string, std::string>> Headers(py::iterable headers) {
    std::vector<std::pair<std::string, std::string>> out;
    for (py::handle pair : headers) {
      py::tuple item = py::reinterpret_borrow<py::tuple>(pair);
      out.emplace_back(ToString(item[0]), ToString(item[1]));
    }
    return out;
  }

  // `body` (bytes, or a list of buffers) appended to `out`.
  static void AddBody(evbuffer* out, py::object body) {
    std::vector<py::buffer_info> parts;
    if (py::isinstance<py::list>(body) || py::isinstance<py::tuple>(body)) {
      for (py::handle part : body) parts.push_back(py::reinterpret_borrow<py::buffer>(part).request());
    } else {
      parts.push_back(body.cast<py::buffer>().request());
    }
    size_t length = 0;
    for (py::buffer_info& part : parts) length += static_cast<size_t>(part.size * part.itemsize);
    // Copying a small body is cheaper than handing the GIL over and waiting to get it back.
    std::unique_ptr<py::gil_scoped_release> release;
    if (length > (1u << 20)) release = std::make_unique<py::gil_scoped_release>();
    for (py::buffer_info& part : parts) evbuffer_add(out, part.ptr, static_cast<size_t>(part.size * part.itemsize));
  }

  void Send(Reply reply) {
    if (std::shared_ptr<Server> server = state_->owner.lock()) {
      server->Send(std::move(reply));
    } else {
      evbuffer_free(reply.body);
    }
  }

  std::shared_ptr<RequestState> state_;
};

class PyServer {
 public:
  PyServer(const std::string& host, int port, int64_t max_body_bytes, bool keep_sent_headers)
      : server_(std::make_shared<Server>(host, port, max_body_bytes, keep_sent_headers)) {}
  ~PyServer() {
    py::gil_scoped_release release;
    server_.reset();
  }
  int port() const { return server_->port(); }
  int fd() const { return server_->fd(); }
  py::list take_events() {
    std::vector<Event> events = server_->events().Take();
    py::list out;
    for (Event& event : events) {
      out.append(py::make_tuple(static_cast<int>(event.kind), Request(std::move(event.request))));
    }
    return out;
  }
  void shutdown(double grace_s) {
    py::gil_scoped_release release;
    server_->Stop(grace_s);
  }

 private:
  std::shared_ptr<Server> server_;
};

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "The HTTP/1.1 transport of tritonctl serve (libevent's evhttp on a thread of its own).";
  m.attr("REQUEST") = static_cast<int>(kRequest);
  m.attr("CANCEL") = static_cast<int>(kCancel);
  py::class_<Request>(m, "Request")
      .def_property_readonly("method", &Request::method)
      .def_property_readonly("path", &Request::path)
      .def_property_readonly("query", &Request::query)
      .def_property_readonly("headers", &Request::headers, "(name, value) pairs of bytes, names in lower case")
      .def_property_readonly("sent_headers", &Request::sent_headers,
                             "(name, value) pairs of bytes as the client sent them (the name's spelling, the "
                             "value's trailing whitespace); empty unless the server keeps them (keep_sent_headers)")
      .def("take_body", &Request::take_body, "The request body (bytes), once.")
      .def("finish", &Request::finish, py::arg("status"), py::arg("reason"), py::arg("headers"), py::arg("body"),
           "Send the reply (from any thread); only the first reply of a request is sent.")
      .def("start", &Request::start, py::arg("status"), py::arg("reason"), py::arg("headers"),
           "Start a streamed reply (from any thread): its head; the body follows by write() and end().")
      .def("write", &Request::write, py::arg("body"), "One part of a streamed reply (bytes or a list of buffers).")
      .def("end", &Request::end, "End a streamed reply.")
      .def("__eq__", &Request::operator==)
      .def("__hash__", &Request::hash);
  py::class_<PyServer>(m, "Server")
      .def(py::init<const std::string&, int, int64_t, bool>(), py::arg("host"), py::arg("port"),
           py::arg("max_body_bytes"), py::arg("keep_sent_headers") = false)
      .def_property_readonly("port", &PyServer::port)
      .def_property_readonly("fd", &PyServer::fd)
      .def("take_events", &PyServer::take_events, "The events since the last call: (kind, request) tuples.")
      .def("shutdown", &PyServer::shutdown, py::arg("grace_s"),
           "Stop accepting, wait up to grace_s for the requests in flight, close everything.");
}
