// A request over the HTTP transport's limits answered as the Python transport answers it: a body
// over --http-max-input-size gets 400 and Triton's JSON text naming the size the client declared
// (Content-Length; a chunked body declares none) and the limit; a head (request line and headers)
// over kMaxHead gets 400 naming that limit, and one that is not HTTP 400 with uvicorn's text.
//
// libevent 2.1's evhttp enforces both limits itself (evhttp_set_max_body_size and
// evhttp_set_max_headers_size: it never holds more than the limit, so memory stays bounded) and
// answers with its own HTML pages ("413 Request Entity Too Large", "400 Bad Request"); 2.1 has no
// hook to answer otherwise (2.2 added evhttp_set_errorcb). So each connection's bufferevent is
// made here (evhttp_set_bevcb) and watched: on its output, such a page's status line is replaced,
// as libevent writes it, by the whole answer, and the rest of the page (written next, and last on
// the connection: it closes it) is dropped; on its input, the head of the request being read is
// kept, to know what it declared. evhttp reads the requests of a connection one at a time: one
// starts where the connection starts, or where the reply to the one before has been written out
// (`Replied`).
//
// Everything runs on the transport's thread (the event loop), but `Replied` and the destructor,
// which run where the caller says. A connection that never sent a byte costs nothing here.

#pragma once

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>

class OverLimitAnswers {
 public:
  static constexpr size_t kMaxHead = 64 * 1024;

  OverLimitAnswers(evhttp* http, int64_t max_body_bytes) : max_body_bytes_(max_body_bytes) {
    evhttp_set_max_body_size(http, max_body_bytes);
    evhttp_set_max_headers_size(http, kMaxHead);
    evhttp_set_bevcb(http, &OverLimitAnswers::NewConnection, this);
  }

  // evhttp hands `req` to the server: what is written on its connection from now is the server's.
  // False when the request must be refused as not HTTP although evhttp read it: its head has
  // Content-Length headers that differ (evhttp takes the first; RFC 9112 6.3 and uvicorn refuse it,
  // and a proxy in front may have taken another, so the rest of the connection is not read).
  bool HandedOver(evhttp_request* req) {
    auto found = connections_.find(StreamOf(req));
    if (found == connections_.end()) return true;
    found->second.handed_over = true;
    return !found->second.conflicting_lengths;
  }

  static constexpr const char* kNotHttp = "Invalid HTTP request received.";  // uvicorn's text

  // The reply to a request of the connection has been written out (its on-complete callback):
  // the connection's next request starts with what its input holds now.
  void Replied(evhttp_request* req) {
    bufferevent* stream = StreamOf(req);
    auto found = connections_.find(stream);
    if (found == connections_.end()) return;
    found->second = Connection{};
    Take(found->second, bufferevent_get_input(stream), 0);
  }

 private:
  struct Connection {
    std::string head;        // the request's bytes so far, until its head is complete
    size_t scanned = 0;      // where to look on for the empty line that ends the head
    bool reading_head = true;  // until the head is complete
    bool overflowed = false;   // the head grew past what evhttp reads: no more is kept
    size_t head_size = 0;      // once complete: its lines' bytes without their ends, as evhttp counts
    int64_t declared = -1;     // Content-Length, or -1: none (chunked, or not known)
    size_t after_head = 0;     // the bytes read since the head's end (the body, chunked framing and all)
    bool handed_over = false;  // evhttp gave the request to the server: a reply now is the server's
    bool conflicting_lengths = false;  // Content-Length headers that differ
  };

  static bufferevent* StreamOf(evhttp_request* req) {
    evhttp_connection* connection = evhttp_request_get_connection(req);
    return connection == nullptr ? nullptr : evhttp_connection_get_bufferevent(connection);
  }

  static thread_local OverLimitAnswers* current_;  // the transport thread's, set by NewConnection

  static bufferevent* NewConnection(event_base* base, void* arg) {
    current_ = static_cast<OverLimitAnswers*>(arg);
    bufferevent* stream = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);  // as evhttp makes it
    if (stream != nullptr) {
      evbuffer_add_cb(bufferevent_get_input(stream), &OverLimitAnswers::OnInput, stream);
      evbuffer_add_cb(bufferevent_get_output(stream), &OverLimitAnswers::OnOutput, stream);
    }
    return stream;
  }

  static void OnInput(evbuffer* input, const evbuffer_cb_info* info, void* arg) {
    OverLimitAnswers* self = current_;
    if (self == nullptr || info->n_added == 0) return;
    auto* stream = static_cast<bufferevent*>(arg);
    auto found = self->connections_.find(stream);
    if (found == self->connections_.end()) {
      void* connection = nullptr;  // evhttp's callbacks carry its connection
      bufferevent_getcb(stream, nullptr, nullptr, nullptr, &connection);
      if (connection == nullptr) return;
      found = self->connections_.emplace(stream, Connection{}).first;
      evhttp_connection_set_closecb(static_cast<evhttp_connection*>(connection), &OverLimitAnswers::OnClosed, self);
    }
    Connection& connection = found->second;
    if (connection.reading_head) {
      self->Take(connection, input, evbuffer_get_length(input) - info->n_added);
    } else if (!connection.handed_over) {
      connection.after_head += info->n_added;
    }
  }

  static void OnClosed(evhttp_connection* connection, void* arg) {
    static_cast<OverLimitAnswers*>(arg)->connections_.erase(evhttp_connection_get_bufferevent(connection));
  }

  // libevent writes a reply's status line with one call: "HTTP/1.x 413 Request Entity Too Large\r\n"
  // for a body over the limit; "HTTP/1.x 400 Bad Request\r\n" for a request it cannot read (a head
  // too long, or not HTTP), which is libevent's own before it hands the request over.
  static void OnOutput(evbuffer* output, const evbuffer_cb_info* info, void* arg) {
    static const std::string kTooLarge = " 413 Request Entity Too Large\r\n", kBad = " 400 Bad Request\r\n";
    OverLimitAnswers* self = current_;
    size_t line_length = info->n_added;
    if (self == nullptr || self->rewriting_ ||
        (line_length != 8 + kTooLarge.size() && line_length != 8 + kBad.size())) {
      return;
    }
    // A socket bufferevent keeps its output's start frozen but while it writes (bufferevent_sock.c):
    // thawed here for the look and the change, then frozen again.
    evbuffer_unfreeze(output, 1);
    size_t length = evbuffer_get_length(output);
    std::string line(line_length, '\0');
    evbuffer_ptr at;
    bool read = length >= line_length && evbuffer_ptr_set(output, &at, length - line_length, EVBUFFER_PTR_SET) == 0 &&
                evbuffer_copyout_from(output, &at, &line[0], line_length) == static_cast<ev_ssize_t>(line_length);
    auto found = self->connections_.find(static_cast<bufferevent*>(arg));
    const Connection* connection = found == self->connections_.end() ? nullptr : &found->second;
    bool too_large = read && line.compare(0, 7, "HTTP/1.") == 0 && line.compare(8, std::string::npos, kTooLarge) == 0;
    bool unreadable = read && line.compare(0, 7, "HTTP/1.") == 0 && line.compare(8, std::string::npos, kBad) == 0 &&
                      connection != nullptr && !connection->handed_over;
    if (too_large || unreadable) {
      std::string answer = too_large ? self->BodyTooLarge(connection, line[7]) : Unreadable(*connection, line[7]);
      self->rewriting_ = true;
      evbuffer* before = evbuffer_new();  // what the connection had still to write before this reply
      if (before != nullptr) {
        evbuffer_remove_buffer(output, before, length - line_length);
        evbuffer_drain(output, line_length);
        evbuffer_add_buffer(output, before);
        evbuffer_free(before);
        evbuffer_add(output, answer.data(), answer.size());
        evbuffer_freeze(output, 0);  // the rest of libevent's page is not written; the connection closes
      }
      self->rewriting_ = false;
    }
    evbuffer_freeze(output, 1);
  }

  static std::string Reply(char minor_version, const std::string& type, const std::string& body) {
    return std::string("HTTP/1.") + minor_version + " 400 Bad Request\r\nContent-Type: " + type +
           "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  }

  // libevent answers 413 also for chunked framing it cannot read: a chunked body that has not
  // reached the limit is that.
  std::string BodyTooLarge(const Connection* connection, char minor_version) const {
    if (connection != nullptr && !connection->reading_head && connection->declared < 0 &&
        connection->after_head <= static_cast<size_t>(max_body_bytes_)) {
      return Unreadable(*connection, minor_version);
    }
    std::string text = connection != nullptr && !connection->reading_head && connection->declared >= 0
                           ? "Request body size of " + std::to_string(connection->declared) + " bytes exceeds"
                           : std::string("Request body exceeds");
    text += " the maximum allowed value of " + std::to_string(max_body_bytes_) +
            " bytes. Use --http-max-input-size to increase the limit";
    return Reply(minor_version, "application/json", "{\"error\":\"" + text + "\"}");  // nothing to escape
  }

  // As the Python transport answers: the head too long, or not HTTP (uvicorn's own text).
  static std::string Unreadable(const Connection& connection, char minor_version) {
    size_t head_size = connection.reading_head ? LineBytes(connection.head) : connection.head_size;
    if (connection.overflowed || head_size > kMaxHead) {
      return Reply(minor_version, "application/json", "{\"error\":\"Request header exceeds the maximum allowed "
                                                      "size of " + std::to_string(kMaxHead) + " bytes\"}");
    }
    return Reply(minor_version, "text/plain; charset=utf-8", kNotHttp);
  }

  // Keep the input's bytes from `from` on while the head is not complete, then read what it declares.
  void Take(Connection& connection, evbuffer* input, size_t from) {
    size_t length = evbuffer_get_length(input);
    if (!connection.reading_head || connection.overflowed || from >= length) return;
    // evhttp counts a head's lines without their line ends: it stops within twice its limit
    size_t room = 2 * kMaxHead + 4 - connection.head.size();
    size_t count = std::min(length - from, room);
    evbuffer_ptr at;
    if (evbuffer_ptr_set(input, &at, from, EVBUFFER_PTR_SET) != 0) return;
    size_t kept = connection.head.size();
    connection.head.resize(kept + count);
    if (evbuffer_copyout_from(input, &at, &connection.head[kept], count) != static_cast<ev_ssize_t>(count)) {
      connection.head.resize(kept);
      return;
    }
    const std::string& head = connection.head;
    for (size_t i = connection.scanned; i < head.size(); ++i) {  // an empty line: "\n\n" or "\n\r\n"
      if (head[i] != '\n') continue;
      size_t end = i + 1 < head.size() && head[i + 1] == '\n' ? i + 2
                   : i + 2 < head.size() && head[i + 1] == '\r' && head[i + 2] == '\n' ? i + 3 : 0;
      if (end != 0) {
        connection.head_size = LineBytes(head.substr(0, end));
        connection.after_head = head.size() - end;
        connection.declared = Declared(head.substr(0, end), &connection.conflicting_lengths);
        connection.reading_head = false;
        connection.head = std::string();
        return;
      }
    }
    connection.scanned = head.size() < 2 ? 0 : head.size() - 2;
    if (head.size() >= 2 * kMaxHead + 4) {  // evhttp has refused it by now
      connection.overflowed = true;
      connection.head = std::string();
    }
  }

  static std::string Lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    return text;
  }

  // The bytes of `text` but its line ends ("\n", "\r\n").
  static size_t LineBytes(const std::string& text) {
    size_t ends = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n') ends += i > 0 && text[i - 1] == '\r' ? 2 : 1;
    }
    return text.size() - ends;
  }

  // As evhttp reads it: a first Transfer-Encoding of "chunked" wins; else the first Content-Length.
  static int64_t Declared(const std::string& head, bool* conflicting_lengths) {
    bool seen_length = false, seen_encoding = false, chunked = false;
    std::string first_length;
    int64_t declared = -1;
    size_t start = head.find('\n');
    while (start != std::string::npos && start + 1 < head.size()) {
      size_t end = head.find('\n', start + 1);
      std::string line = head.substr(start + 1, (end == std::string::npos ? head.size() : end) - start - 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      start = end;
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = Lower(line.substr(0, colon));
      size_t first = line.find_first_not_of(" \t", colon + 1);
      size_t last = line.find_last_not_of(" \t");
      std::string value = first == std::string::npos ? "" : line.substr(first, last - first + 1);
      if (name == "content-length" && seen_length) {
        *conflicting_lengths = *conflicting_lengths || value != first_length;
      } else if (name == "content-length") {
        seen_length = true;
        first_length = value;
        if (!value.empty() && value.size() < 19 && value.find_first_not_of("0123456789") == std::string::npos) {
          declared = std::stoll(value);
        }
      } else if (name == "transfer-encoding" && !seen_encoding) {
        seen_encoding = true;
        chunked = Lower(value) == "chunked";
      }
    }
    return chunked ? -1 : declared;
  }

  const int64_t max_body_bytes_;
  bool rewriting_ = false;
  std::unordered_map<bufferevent*, Connection> connections_;  // those that sent something, until closed
};

inline thread_local OverLimitAnswers* OverLimitAnswers::current_ = nullptr;
