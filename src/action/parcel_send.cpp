// A request's round trip: the caller sends it (send_request) and keeps an
// entry until it is answered; the destination runs it (run_request) and its
// RequestResponder sends the result or the failure back; the caller's entry
// is completed by the reply (deliver, failed) and, for a rendezvous parcel,
// freed by the release once the destination has pulled the chunks.
#include <algorithm>
#include <memory>
#include <span>
#include <string>

#include "rdmx/core/error.hpp"
#include "rdmx/core/log.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "rdmx/serial/registration_cache.hpp"
#include "parcel_layer.hpp"

namespace rdmx::parcel {
namespace {

void on_release(std::uint64_t token) { current_worker().released(token); }

// The destination's answer to one request.
class RequestResponder final : public Responder {
 public:
  RequestResponder(WorkerParcels& worker, const Header& h) : worker_(worker), h_(h) {}
  ~RequestResponder() {
    if (archive_) worker_.give_archive(std::move(archive_));
  }
  bool wants_result() const noexcept override { return (h_.flags & wants_reply) != 0; }
  serial::OutputArchive& archive() override {
    if (!archive_) archive_ = worker_.take_archive();
    return *archive_;
  }
  void reply() override {
    if (!wants_result()) return;
    try {
      send_result();
    } catch (const Error& e) {
      // E.g. the result holds more pointer chunks than the registration budget.
      worker_.send_failure(source(), h_, e.code(), "the result of " + action_name(h_.action) + " could not be sent: " + e.what());
    }
  }
  void fail(Errc code, const std::string& text) override {
    if (wants_result()) {
      worker_.send_failure(source(), h_, code, text);
    } else {
      rdmx::log(rdmx::LogLevel::error, "process %u: a posted %s from %s failed (nobody waits for it): %s\n",
                worker_.self.process, action_name(h_.action).c_str(), to_string(source()).c_str(), text.c_str());
    }
  }

 private:
  ThreadId source() const noexcept { return {h_.source_process, h_.source_thread}; }
  // The reply parcel: eager, or with chunks the caller pulls, holding the
  // archive in an entry of this thread until the caller releases it.
  void send_result() {
    if (!archive_) archive_ = worker_.take_archive();  // a handler that wrote nothing (cannot happen for typed actions)
    serial::OutputArchive& ar = *archive_;
    const bool chunks = !ar.out_of_line_chunks().empty();
    if (chunks) serial::register_pointer_chunks(ar, worker_.layer.registrations);
    const std::span<const std::byte> message = ar.flatten();
    worker_.count_sent(ar, message.size());
    const ThreadId to = source();
    Header h;
    h.token = h_.token;
    h.source_process = worker_.self.process;
    h.source_thread = worker_.self.thread;
    h.kind = kind_reply;
    h.flags = h_.flags & path_flags;  // back the way the request came
    if (chunks) {
      h.flags |= rendezvous;
      h.release = worker_.add_entry(to.process, 0);
      Entry& e = *worker_.find(h.release);
      e.awaiting_release = true;
      e.archive = std::move(archive_);
    }
    try {
      if (transmit(worker_.layer.path, to, h, message)) ++worker_.stats.fused;
    } catch (const Error& e) {
      worker_.forget(h.release);
      rdmx::log(rdmx::LogLevel::error, "process %u: a reply to %s could not be sent: %s\n", worker_.self.process,
                to_string(to).c_str(), e.what());
    }
  }

  WorkerParcels& worker_;
  const Header& h_;
  std::unique_ptr<serial::OutputArchive> archive_;
};

}  // namespace

// ---- the caller's side ----

void send_request(Path path, ThreadId dest, std::uint64_t action, ArchiveLease& lease, ReplyTarget* reply,
                  SentCallback* callback) {
  WorkerParcels& worker = current_worker();
  worker.job.check_destination(dest);
  if (dest.is_service())
    throw Error(Errc::invalid_argument, "remote actions run on worker threads; " + to_string(dest) + " is a service thread");
  if (worker.job.process_failed(dest.process))
    throw Error(Errc::peer_failed, "process " + std::to_string(dest.process) + " has failed");
  serial::OutputArchive& ar = *lease;
  const bool chunks = !ar.out_of_line_chunks().empty();
  if (chunks) serial::register_pointer_chunks(ar, worker.layer.registrations);
  const std::span<const std::byte> message = ar.flatten();
  worker.count_sent(ar, message.size());
  SentCallback* const caller_callback = callback;

  Header h;
  h.action = action;
  h.source_process = worker.self.process;
  h.source_thread = worker.self.thread;
  h.kind = kind_request;
  h.flags = static_cast<std::uint8_t>((reply != nullptr ? wants_reply : 0) | (chunks ? rendezvous : 0) |
                                      worker.layer.path.flags_for(path));
  if (reply != nullptr || chunks) {
    // Registered before sending: the answer can come back while we are still
    // in transmit (it progresses when the destination's ring is full).
    h.token = worker.add_entry(dest.process, action);
    Entry& e = *worker.find(h.token);
    e.awaiting_reply = reply != nullptr;
    if (reply != nullptr) e.reply = std::move(*reply);
    if (chunks) {
      e.awaiting_release = true;
      e.archive = std::move(lease.owned());  // the message points into it: held until the destination pulled
      if (callback != nullptr) e.callback = std::move(*callback);
      callback = nullptr;
    }
  }
  try {
    if (transmit(worker.layer.path, dest, h, message)) ++worker.stats.fused;
  } catch (...) {
    // The caller fails its future with what is thrown, and runs the callback.
    if (Entry* e = worker.find(h.token); e != nullptr && e->callback && caller_callback != nullptr)
      *caller_callback = std::move(e->callback);
    worker.forget(h.token);
    throw;
  }
  worker.markers().count_request(dest);  // only once it went: quiet() waits for as many to run
  if (callback != nullptr && *callback) (*callback)(nullptr);  // eager: the message was copied out, the arguments may be reused
}

void WorkerParcels::deliver(std::uint64_t token, const Received& in) {
  Entry* e = find(token);
  if (e == nullptr || !e->awaiting_reply) {
    rdmx::log(rdmx::LogLevel::error, "process %u: a reply from %s matches no parcel of thread %u (dropped)\n", self.process,
              to_string(in.source).c_str(), self.thread);
    return;
  }
  ReplyTarget c = std::move(e->reply);
  e->awaiting_reply = false;
  free_if_done(token);
  c.deliver(*c.state, in);  // may run continuations, which may send: e is not used after this
}

// ---- the destination's side ----

void WorkerParcels::run_request(const Header& h, const Received& in) {
  {
    RequestResponder out(*this, h);
    Handler handle = ActionRegistry::instance().find_cached(h.action);
    if (handle == nullptr)
      out.fail(Errc::unknown_function, "process " + std::to_string(self.process) + " has no remote action with id " +
                                           action_name(h.action) +
                                           " (were caller and destination built from the same program?)");
    else
      handle(in, out);  // catches what the action throws
  }
  markers_.count_ran({h.source_process, h.source_thread});
}

void WorkerParcels::send_failure(ThreadId to, const Header& request, Errc code, const std::string& text) {
  Header h;
  h.token = request.token;
  h.source_process = self.process;
  h.source_thread = self.thread;
  h.kind = kind_reply;
  h.flags = is_failure | (request.flags & path_flags);
  h.errc = static_cast<std::uint16_t>(code);
  // Long texts are cut: a reply must fit a one-sided call.
  const std::size_t n = std::min(text.size(), std::size_t{16384});
  try {
    transmit(layer.path, to, h, std::as_bytes(std::span(text.data(), n)));
  } catch (const Error& e) {
    rdmx::log(rdmx::LogLevel::error, "process %u: a failure could not be reported to %s (%s): %s\n", self.process,
              to_string(to).c_str(), e.what(), text.c_str());
  }
}

void WorkerParcels::send_release(ThreadId to, std::uint64_t token) {
  if (token == 0) return;
  try {
    auto release = [token] { on_release(token); };
    if (layer.path.one_sided(to.process))
      MessengerGlobal().call(to, release);
    else
      rdmx::call(to, release);
  } catch (const Error& e) {
    rdmx::log(rdmx::LogLevel::error, "process %u: could not release a parcel of %s: %s\n", self.process,
              to_string(to).c_str(), e.what());
  }
}

}  // namespace rdmx::parcel
