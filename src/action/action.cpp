// The registry of remote actions and how their failures are told.

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <typeinfo>
#include <unordered_map>

#include "registry.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/serial/signature.hpp"

namespace rdmx::parcel {
namespace {

struct Registered {
  std::string name;  // mangled
  Handler handler = nullptr;
  bool conflict = false;
};

struct Registry {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, Registered> actions;
};

// A function-local static: actions register during static initialization,
// in whatever order the translation units run.
Registry& registry() {
  static Registry r;
  return r;
}

std::string hex(std::uint64_t id) {
  char text[24];
  std::snprintf(text, sizeof text, "%#llx", static_cast<unsigned long long>(id));
  return text;
}

// "rdmx::parcel::detail::ActionWrapper<rdmx::action_t<&add> >" -> "add"
std::string readable(const std::string& mangled) {
  std::string name = demangle(mangled.c_str());
  const std::string wrapper = "rdmx::parcel::detail::ActionWrapper<";
  if (name.rfind(wrapper, 0) == 0 && name.size() > wrapper.size() && name.back() == '>') {
    name = name.substr(wrapper.size(), name.size() - wrapper.size() - 1);
    while (!name.empty() && name.back() == ' ') name.pop_back();
  }
  const std::string function = "rdmx::action_t<&";  // rdmx::action<&f>: just f
  if (name.rfind(function, 0) == 0 && name.back() == '>') name = name.substr(function.size(), name.size() - function.size() - 1);
  return name;
}

}  // namespace

std::uint64_t register_action(std::string_view name, Handler handler) {
  const std::uint64_t id = serial::signature_hash(name);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto [it, added] = r.actions.try_emplace(id, Registered{std::string(name), handler, false});
  if (!added && it->second.name != name) it->second.conflict = true;
  return id;
}

Handler find_action(std::uint64_t id) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.actions.find(id);
  return it == r.actions.end() || it->second.conflict ? nullptr : it->second.handler;
}

std::string action_conflict(std::uint64_t id) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.actions.find(id);
  return it != r.actions.end() && it->second.conflict ? " (two actions of this program hash to it: rename one)" : "";
}

std::string action_name(std::uint64_t id) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.actions.find(id);
  if (it == r.actions.end()) return "action " + hex(id);
  return "action " + readable(it->second.name);
}

void Responder::fail_with_current_exception(std::uint64_t action) {
  const ThreadId me = this_thread();
  const std::string where =
      action_name(action) + " on " + std::to_string(me.process) + "/" + std::to_string(me.thread) + " threw ";
  try {
    throw;
  } catch (const Error& e) {
    fail(Errc::remote_exception, where + "rdmx::Error (" + to_string(e.code()) + "): " + e.what());
  } catch (const std::exception& e) {
    fail(Errc::remote_exception, where + type_name(typeid(e)) + ": " + e.what());
  } catch (...) {
    fail(Errc::remote_exception, where + "a non-standard exception");
  }
}

}  // namespace rdmx::parcel
