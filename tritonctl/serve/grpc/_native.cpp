// The gRPC transport of `tritonctl serve`, in C++: HTTP/2, message framing, flow control,
// deadlines and cancellation run on gRPC's own threads without the GIL, and Python sees only
// whole messages. Every method arrives through one generic service (raw bytes in, raw bytes
// out); events (a message, the client's half-close, a cancellation) go into one queue whose
// eventfd the server's event loop watches, so a burst of calls costs the loop one wake-up.
// Python answers through Call.write / Call.finish, from any thread.
//
// One exception to the queue: a ModelInfer message that arrives while no other ModelInfer call
// is waiting for its answer goes straight to Python's inline handler, on the gRPC thread that
// read it (taking the GIL). At low load that saves the event loop's wake-up (about 35 us here);
// under load the queue's bursts are cheaper than a GIL hand-off per message.
//
// Where the server forwards client metadata as request parameters (keep_metadata), each call
// keeps its client metadata for Python (Call.metadata).

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "event_queue.h"

namespace py = pybind11;

namespace {

enum EventKind { kMessage = 0, kHalfClose = 1, kCancel = 2, kOpen = 3 };

constexpr int kHardMetadataLimit = 16 * 1024;

class Reactor;

// The inline path of ModelInfer: the handler (None while the server is not serving) and the
// number of ModelInfer calls read but not yet answered.
struct InlinePath {
  std::string method;
  std::mutex mu;
  py::object handler;  // guarded by mu; set and cleared with the GIL held
  std::atomic<int> unanswered{0};
};

// What Python holds of one call. It outlives the reactor: after the call is done every
// operation on it is a no-op.
struct CallState {
  std::mutex mu;
  Reactor* reactor = nullptr;  // null once the call is done
  std::string method;
  bool streaming = false;
  std::deque<grpc::ByteBuffer> pending;  // writes waiting for the one in flight
  grpc::ByteBuffer in_flight;
  bool writing = false;
  bool finish_requested = false;
  bool finished = false;  // Finish has been called (exactly once)
  bool cancelled = false;  // the client went away or the deadline passed
  bool triton_grpc_error = false;  // a stream opened with the header triton_grpc_error: true
  // The client's metadata, kept only where the server forwards headers as request parameters.
  std::vector<std::pair<std::string, std::string>> metadata;
  InlinePath* counted_in = nullptr;  // a ModelInfer call counted as unanswered
  grpc::Status status;

  // The call is answered (or gone): it no longer counts as unanswered. Called with mu held.
  void Answered() {
    if (counted_in != nullptr) {
      counted_in->unanswered.fetch_sub(1);
      counted_in = nullptr;
    }
  }
};

struct Event {
  EventKind kind;
  std::shared_ptr<CallState> call;
  grpc::ByteBuffer payload;
};

class Reactor : public grpc::ServerGenericBidiReactor {
 public:
  Reactor(grpc::GenericCallbackServerContext* context, EventQueue<Event>* events, const std::string& stream_method,
          InlinePath* inline_path, bool keep_metadata)
      : events_(events), inline_path_(inline_path), state_(std::make_shared<CallState>()) {
    state_->reactor = this;
    state_->method = context->method();
    state_->streaming = state_->method == stream_method;
    const auto& metadata = context->client_metadata();
    if (state_->streaming) {
      auto header = metadata.find("triton_grpc_error");
      state_->triton_grpc_error = header != metadata.end() && header->second == "true";
    }
    if (keep_metadata) {
      state_->metadata.reserve(metadata.size());
      for (const auto& entry : metadata) {
        state_->metadata.emplace_back(std::string(entry.first.data(), entry.first.size()),
                                      std::string(entry.second.data(), entry.second.size()));
      }
      // Python sees the stream's metadata before its first message (a restricted stream ends there).
      if (state_->streaming) events_->Push({kOpen, state_, grpc::ByteBuffer()});
    }
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (ok && state_->method == inline_path_->method && RunInline()) {
      return;
    }
    if (ok && state_->streaming) {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (state_->finish_requested) return;  // the stream is answered: what its client still sends is dropped
    }
    if (ok) {
      events_->Push({kMessage, state_, std::move(request_)});
      request_ = grpc::ByteBuffer();
      if (state_->streaming) StartRead(&request_);
    } else if (state_->streaming) {  // the client closed its side of the stream
      events_->Push({kHalfClose, state_, grpc::ByteBuffer()});
    } else {  // a unary call without its message: answered here as Triton answers it, Python never sees it
      Finish(state_, grpc::Status(grpc::StatusCode::INTERNAL, "Unable to parse request"));
    }
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->writing = false;
    if (!ok) state_->pending.clear();
    if (!state_->pending.empty()) {
      state_->in_flight = std::move(state_->pending.front());
      state_->pending.pop_front();
      state_->writing = true;
      lock.unlock();
      StartWrite(&state_->in_flight);
      return;
    }
    if (state_->finish_requested && !state_->finished) {
      state_->finished = true;
      grpc::Status status = state_->status;
      lock.unlock();
      grpc::ServerGenericBidiReactor::Finish(status);
    }
  }

  void OnCancel() override {
    bool finish_now;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->cancelled = true;  // before the event: see Call.cancelled
      state_->Answered();
      state_->pending.clear();
      state_->finish_requested = true;
      state_->status = grpc::Status::CANCELLED;
      finish_now = !state_->writing && !state_->finished;
      if (finish_now) state_->finished = true;
    }
    events_->Push({kCancel, state_, grpc::ByteBuffer()});
    if (finish_now) grpc::ServerGenericBidiReactor::Finish(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->reactor = nullptr;
      state_->Answered();
    }
    delete this;
  }

  // Called with no lock held, from any thread.
  static void Write(const std::shared_ptr<CallState>& state, grpc::ByteBuffer message) {
    std::unique_lock<std::mutex> lock(state->mu);
    if (state->finish_requested || state->reactor == nullptr) return;
    if (state->writing) {
      state->pending.push_back(std::move(message));
      return;
    }
    state->writing = true;
    state->in_flight = std::move(message);
    Reactor* reactor = state->reactor;
    lock.unlock();
    reactor->StartWrite(&state->in_flight);
  }

  static void Finish(const std::shared_ptr<CallState>& state, grpc::Status status,
                     grpc::ByteBuffer* last = nullptr) {
    std::unique_lock<std::mutex> lock(state->mu);
    if (state->finish_requested || state->reactor == nullptr) return;
    state->finish_requested = true;
    state->Answered();
    state->status = status;
    Reactor* reactor = state->reactor;
    if (state->writing) {  // the last message and the status follow the writes in flight
      if (last != nullptr) state->pending.push_back(std::move(*last));
      return;
    }
    state->finished = true;
    if (last != nullptr) {
      state->writing = true;
      state->in_flight = std::move(*last);
      lock.unlock();
      reactor->StartWriteAndFinish(&state->in_flight, grpc::WriteOptions(), status);
    } else {
      lock.unlock();
      reactor->grpc::ServerGenericBidiReactor::Finish(status);
    }
  }

 private:
  // Counts this ModelInfer call as unanswered; when it is the only one and the handler is set,
  // hands it to the handler on this thread and returns true.
  bool RunInline();

  EventQueue<Event>* events_;
  InlinePath* inline_path_;
  std::shared_ptr<CallState> state_;
  grpc::ByteBuffer request_;
};

class Service : public grpc::CallbackGenericService {
 public:
  Service(EventQueue<Event>* events, std::string stream_method, InlinePath* inline_path, bool keep_metadata)
      : events_(events), stream_method_(std::move(stream_method)), inline_path_(inline_path),
        keep_metadata_(keep_metadata) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* context) override {
    return new Reactor(context, events_, stream_method_, inline_path_, keep_metadata_);
  }

 private:
  EventQueue<Event>* events_;
  std::string stream_method_;
  InlinePath* inline_path_;
  bool keep_metadata_;
};

grpc::ByteBuffer ToByteBuffer(py::buffer data) {
  py::buffer_info info = data.request();
  grpc::Slice slice(info.ptr, static_cast<size_t>(info.size * info.itemsize));
  return grpc::ByteBuffer(&slice, 1);
}

py::bytes ToBytes(grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  buffer.Dump(&slices);
  if (slices.size() == 1) {
    return py::bytes(reinterpret_cast<const char*>(slices[0].begin()), slices[0].size());
  }
  PyObject* bytes = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(buffer.Length()));
  if (bytes == nullptr) throw py::error_already_set();
  char* out = PyBytes_AS_STRING(bytes);
  for (const grpc::Slice& slice : slices) {
    std::memcpy(out, slice.begin(), slice.size());
    out += slice.size();
  }
  return py::reinterpret_steal<py::bytes>(bytes);
}

class Call {
 public:
  explicit Call(std::shared_ptr<CallState> state) : state_(std::move(state)) {}
  const std::string& method() const { return state_->method; }
  bool cancelled() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->cancelled;
  }
  bool answered() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->finish_requested || state_->reactor == nullptr;
  }
  bool triton_grpc_error() const { return state_->triton_grpc_error; }
  // Set once, before Python sees the call: read without the lock.
  py::list metadata() const {
    py::list out;
    for (const auto& entry : state_->metadata) out.append(py::make_tuple(py::bytes(entry.first), py::bytes(entry.second)));
    return out;
  }
  // Both copy the message, then let go of the GIL: gRPC may send it on this thread.
  void write(py::buffer message) {
    grpc::ByteBuffer buffer = ToByteBuffer(message);
    py::gil_scoped_release release;
    Reactor::Write(state_, std::move(buffer));
  }
  void finish(int code, const std::string& message, py::object reply) {
    grpc::Status status(static_cast<grpc::StatusCode>(code), message);
    if (reply.is_none()) {
      py::gil_scoped_release release;
      Reactor::Finish(state_, status);
    } else {
      grpc::ByteBuffer last = ToByteBuffer(reply.cast<py::buffer>());
      py::gil_scoped_release release;
      Reactor::Finish(state_, status, &last);
    }
  }
  bool operator==(const Call& other) const { return state_ == other.state_; }
  size_t hash() const { return std::hash<CallState*>()(state_.get()); }

 private:
  std::shared_ptr<CallState> state_;
};

bool Reactor::RunInline() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->counted_in = inline_path_;
  }
  if (inline_path_->unanswered.fetch_add(1) != 0) return false;
  py::gil_scoped_acquire gil;
  py::object handler;
  {
    std::lock_guard<std::mutex> lock(inline_path_->mu);
    handler = inline_path_->handler;
  }
  if (!handler || handler.is_none()) return false;
  try {
    handler(Call(state_), ToBytes(request_));
  } catch (py::error_already_set& error) {  // a bug in the handler: the client still gets an answer
    error.discard_as_unraisable("ModelInfer inline handler");
    Finish(state_, grpc::Status(grpc::StatusCode::INTERNAL, "Unexpected error in the inline handler"));
  }
  request_ = grpc::ByteBuffer();
  return true;
}

class Server {
 public:
  Server(const std::string& address, int max_message_bytes, const std::string& stream_method,
         const std::string& inline_method, bool keep_metadata)
      : service_(&events_, stream_method, &inline_path_, keep_metadata) {
    inline_path_.method = inline_method;
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port_);
    builder.RegisterCallbackGenericService(&service_);
    builder.SetMaxReceiveMessageSize(max_message_bytes);
    builder.SetMaxSendMessageSize(max_message_bytes);
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
#ifndef GRPC_ARG_ABSOLUTE_MAX_METADATA_SIZE
    // A gRPC without soft and hard metadata limits has one, 8 KiB by default: Triton's gRPC
    // refuses a call's metadata only past 16 KiB (its hard limit), so this one is raised to it.
    builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, kHardMetadataLimit);
#endif
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) throw std::runtime_error("cannot bind the gRPC port at " + address);
  }

  int port() const { return port_; }
  int fd() const { return events_.fd(); }

  // `handler(call, payload)`, or None to send every message through the queue.
  void set_inline_handler(py::object handler) {
    py::object old;  // dropped after the lock is let go
    {
      std::lock_guard<std::mutex> lock(inline_path_.mu);
      old = std::move(inline_path_.handler);
      inline_path_.handler = std::move(handler);
    }
  }

  py::list take_events() {
    std::vector<Event> events = events_.Take();
    py::list out;
    for (Event& event : events) {
      py::object payload = event.kind == kMessage ? py::object(ToBytes(event.payload)) : py::none();
      out.append(py::make_tuple(static_cast<int>(event.kind), Call(event.call), payload));
    }
    return out;
  }

  // Stops accepting; calls still open after `grace_s` are cancelled. Blocks: call it off the
  // event loop, which must keep answering the calls in flight.
  void shutdown(double grace_s) {
    py::gil_scoped_release release;
    auto deadline = std::chrono::system_clock::now() +
                    std::chrono::microseconds(static_cast<int64_t>(grace_s * 1e6));
    server_->Shutdown(deadline);
    server_->Wait();
  }

 private:
  EventQueue<Event> events_;
  InlinePath inline_path_;
  Service service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "The gRPC transport of tritonctl serve (gRPC C++ callback API, generic service).";
  m.attr("MESSAGE") = static_cast<int>(kMessage);
  m.attr("HALF_CLOSE") = static_cast<int>(kHalfClose);
  m.attr("CANCEL") = static_cast<int>(kCancel);
  m.attr("OPEN") = static_cast<int>(kOpen);
  py::class_<Call>(m, "Call")
      .def_property_readonly("method", &Call::method)
      .def_property_readonly("cancelled", &Call::cancelled,
                             "Whether the client went away (or its deadline passed).")
      .def_property_readonly("answered", &Call::answered,
                             "Whether the call has its status (or is gone): a message read after it is dropped.")
      .def_property_readonly("triton_grpc_error", &Call::triton_grpc_error,
                             "Whether the client opened this stream with the header triton_grpc_error: true.")
      .def_property_readonly("metadata", &Call::metadata,
                             "The client's metadata, (key, value) pairs of bytes; empty unless the server keeps it.")
      .def("write", &Call::write, "Queue one message of a streaming response.")
      .def("finish", &Call::finish, py::arg("code"), py::arg("message"), py::arg("reply"),
           "End the call with a status, after `reply` (bytes or None) and every queued write.")
      .def("__eq__", &Call::operator==)
      .def("__hash__", &Call::hash);
  py::class_<Server>(m, "Server")
      .def(py::init<const std::string&, int, const std::string&, const std::string&, bool>(), py::arg("address"),
           py::arg("max_message_bytes"), py::arg("stream_method"), py::arg("inline_method"),
           py::arg("keep_metadata") = false)
      .def_property_readonly("port", &Server::port)
      .def_property_readonly("fd", &Server::fd)
      .def("set_inline_handler", &Server::set_inline_handler, py::arg("handler"),
           "Where a message of `inline_method` goes when no other such call is unanswered: "
           "handler(call, payload) on the gRPC thread, or None for the queue.")
      .def("take_events", &Server::take_events,
           "The events since the last call: (kind, call, payload) tuples.")
      .def("shutdown", &Server::shutdown, py::arg("grace_s"));
}
