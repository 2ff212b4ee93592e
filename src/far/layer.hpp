// How far memory finds this process's runtime: a Manager attaches its
// runtime when it is made and detaches it when it ends; far pointers,
// scopes and data structures look it up (detail::runtime()).
#pragma once

namespace rdmx {
class Job;
}

namespace rdmx::far::detail {

class Runtime;

// The process's Job, nullptr when it has none.
Job* job_if_any() noexcept;
// Throws Errc::invalid_argument when the process has a far::Manager already.
void check_no_runtime(Job* job);
void attach(Runtime& runtime, Job* job);
void detach(Runtime& runtime) noexcept;

}  // namespace rdmx::far::detail
