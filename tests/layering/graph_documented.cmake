# cmake -DGRAPH=build/layers.md -DDOC=docs/architecture.md -P graph_documented.cmake
# Passes when the layer graph in DOC (between its layer-graph markers) is
# GRAPH, the graph the build draws from src/CMakeLists.txt's declarations.
set(begin "<!-- layer graph: generated")
set(end "<!-- end of layer graph -->")
file(READ "${GRAPH}" graph)
file(READ "${DOC}" doc)
string(FIND "${doc}" "${begin}" from)
string(FIND "${doc}" "${end}" to)
if(from EQUAL -1 OR to EQUAL -1 OR to LESS from)
  message(FATAL_ERROR "${DOC} has no layer graph between a line starting \"${begin}\" and \"${end}\"")
endif()
string(SUBSTRING "${doc}" ${from} -1 rest)
string(FIND "${rest}" "\n" line_end)
math(EXPR first "${from} + ${line_end} + 1")
math(EXPR length "${to} - ${first}")
string(SUBSTRING "${doc}" ${first} ${length} documented)
if(NOT documented STREQUAL graph)
  # As written, not reflowed as an error's text is.
  message(NOTICE "The declared graph (${GRAPH}):\n${graph}")
  message(FATAL_ERROR "the layer graph in ${DOC} is not the one src/CMakeLists.txt declares; "
                      "replace the lines between its markers with ${GRAPH}")
endif()
message(STATUS "the documented layer graph is the declared one")
