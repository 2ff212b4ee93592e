// std::tuple and std::pair: their elements in order, nothing else.
#pragma once
#include <tuple>
#include <utility>

#include "rdmx/serial/access.hpp"

namespace rdmx::serial {

template <archive A, class... T>
void serialize(A& ar, std::tuple<T...>& value) {
  std::apply([&ar](auto&... elements) { (serialize_value(ar, elements), ...); }, value);
}

template <archive A, class T1, class T2>
void serialize(A& ar, std::pair<T1, T2>& value) {
  serialize_value(ar, value.first);
  serialize_value(ar, value.second);
}

}  // namespace rdmx::serial
