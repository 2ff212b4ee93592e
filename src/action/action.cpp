// Actions' names in messages, and how their failures are told.
#include <string>
#include <typeinfo>

#include "rdmx/action/parcel.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"

namespace rdmx::parcel {
namespace {

// "rdmx::parcel::detail::ActionWrapper<rdmx::action_t<&add> >" -> "add"
std::string readable(std::string name) {
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

std::string action_name(std::uint64_t id) { return "action " + readable(ActionRegistry::instance().name_of(id)); }

void Responder::fail_with_current_exception(std::uint64_t action) {
  const ThreadId me = this_thread();
  const std::string where =
      action_name(action) + " on " + to_string(me) + " threw ";
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
