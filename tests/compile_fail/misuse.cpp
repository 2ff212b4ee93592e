// One misuse of rdmx's entry points per RDMX_CASE_* (see CMakeLists.txt);
// with none defined, the valid uses they differ from, which must compile.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "rdmx/fabric/call.hpp"
#include "rdmx/action/action.hpp"
#include "rdmx/invoke/messenger.hpp"

namespace {

int add(int a, int b) { return a + b; }
struct Opaque {  // no serialize(): cannot be an action's parameter or result
  int* p;
};
int open_up(Opaque o) { return *o.p; }
Opaque make_opaque(int) { return {}; }
void work() {}

}  // namespace

void uses(rdmx::ThreadId to, rdmx::Synchronizer& sync) {
  const int x = 1;
  std::string text = "x";
  int out = 0;
#if defined(RDMX_CASE_action_captures)
  auto f = rdmx::async([x](int y) { return x + y; }, to, 2);
#elif defined(RDMX_CASE_action_function_pointer)
  rdmx::post(add, to, 1, 2);
#elif defined(RDMX_CASE_action_generic_lambda)
  rdmx::post([](auto v) { (void)v; }, to, 1);
#elif defined(RDMX_CASE_action_argument_count)
  rdmx::post(rdmx::action<&add>, to, 1);
#elif defined(RDMX_CASE_action_argument_type)
  auto f = rdmx::async(rdmx::action<&add>, to, 1, text);
#elif defined(RDMX_CASE_action_not_serializable)
  rdmx::post(rdmx::when_sent(sync), rdmx::action<&open_up>, to, Opaque{&out});
#elif defined(RDMX_CASE_action_result_not_serializable)
  auto f = rdmx::async(rdmx::action<&make_opaque>, to, 1);
#elif defined(RDMX_CASE_call_function_pointer)
  rdmx::call(to, work);
#elif defined(RDMX_CASE_call_owning_capture)
  rdmx::call(to, [text] { (void)text.size(); });
#elif defined(RDMX_CASE_call_arguments)
  rdmx::call(to, [](int y) { (void)y; });
#elif defined(RDMX_CASE_call_buffer_parameters)
  rdmx::MessengerGlobal().call_buffer(to, [](int) {}, std::span<const std::byte>{});
#elif defined(RDMX_CASE_call_return_type)
  long wide = 0;
  rdmx::call_return(to, [] { return 1; }, rdmx::into(wide, sync));
#elif defined(RDMX_CASE_call_return_future_result)
  auto f = rdmx::call_return(to, [] { return std::string(); });
#elif defined(RDMX_CASE_call_completion)
  rdmx::call(to, [x] { (void)x; }, sync);
#else
  rdmx::Future<int> f = rdmx::async([](int y) { return y + 1; }, to, 2);
  rdmx::post(rdmx::action<&add>, to, 1, 2);
  rdmx::post(rdmx::when_sent(sync), rdmx::action<&add>, to, 1, 2);
  rdmx::Future<int> h = rdmx::async(rdmx::parcel::Path::send, rdmx::when_run(sync), rdmx::action<&add>, to, 1, 2);
  rdmx::call(to, [x] { (void)x; });
  rdmx::call(to, [] { work(); });
  rdmx::MessengerGlobal().call_buffer(to, [](std::span<std::byte>) {}, std::span<const std::byte>{});
  rdmx::call_return(to, [] { return 1; }, rdmx::into(out, sync));
  rdmx::Future<int> g = rdmx::call_return(to, [] { return 1; });
  rdmx::call(to, [x] { (void)x; }, rdmx::when_run(sync));
  (void)f;
  (void)g;
  (void)h;
  (void)&open_up;
  (void)&make_opaque;
#endif
}
