// The two archive types and the concept that built-in serialize overloads
// are constrained on, so they never capture somebody else's archive type.
#pragma once
#include <concepts>

namespace rdmx::serial {

class OutputArchive;
class InputArchive;
class RmaMemory;

template <class A>
concept archive = std::same_as<A, OutputArchive> || std::same_as<A, InputArchive>;

}  // namespace rdmx::serial
