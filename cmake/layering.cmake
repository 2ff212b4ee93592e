# The layering rules in the build. Every layer (rdmx_layer in
# src/CMakeLists.txt), the tests, the apps and the benchmarks have their
# includes checked by cmake/check_layer.cmake before they compile, and the
# declared graph is written out for docs/architecture.md.

# rdmx_check_includes(name FILES file... (LAYER layer USES layer... | PROGRAMS what WHITE_BOX entry...))
# Adds target rdmx_<name>_layering, which checks FILES whenever one of them
# changes and fails the build naming each offending file, line and header.
function(rdmx_check_includes name)
  cmake_parse_arguments(C "" "LAYER;PROGRAMS" "FILES;USES;WHITE_BOX" ${ARGN})
  set(dir ${PROJECT_BINARY_DIR}/layering)
  set(stamp ${dir}/${name}.stamp)
  # Lists travel in a file: a command line would split them.
  set(rules ${dir}/${name}.cmake)
  file(CONFIGURE OUTPUT ${rules} CONTENT
       "set(ROOT \"${PROJECT_SOURCE_DIR}\")\nset(BUILD \"${PROJECT_BINARY_DIR}\")\nset(LAYER \"${C_LAYER}\")\nset(USES \"${C_USES}\")\nset(PROGRAMS \"${C_PROGRAMS}\")\nset(WHITE_BOX \"${C_WHITE_BOX}\")\nset(FILES \"${C_FILES}\")\n")
  add_custom_command(OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DRULES=${rules} -DSTAMP=${stamp} -P ${PROJECT_SOURCE_DIR}/cmake/check_layer.cmake
    DEPENDS ${C_FILES} ${rules} ${PROJECT_SOURCE_DIR}/cmake/check_layer.cmake
    COMMENT "Checking the includes of ${name}")
  add_custom_target(rdmx_${name}_layering ALL DEPENDS ${stamp})
endfunction()

# rdmx_check_program_includes(what directory [EXCLUDE subdirectory...]): the
# C and C++ files under directory (tests, apps or benchmarks) include public
# headers only, except the white-box tests declared with rdmx_white_box.
# Call it after every such test of the directory is declared.
function(rdmx_check_program_includes what directory)
  cmake_parse_arguments(P "" "" "EXCLUDE" ${ARGN})
  file(GLOB_RECURSE files CONFIGURE_DEPENDS ${directory}/*.cpp ${directory}/*.hpp ${directory}/*.c ${directory}/*.h)
  foreach(excluded IN LISTS P_EXCLUDE)
    set(kept "")
    foreach(file IN LISTS files)
      string(FIND "${file}" "${directory}/${excluded}/" at)
      if(NOT at EQUAL 0)
        list(APPEND kept ${file})
      endif()
    endforeach()
    set(files ${kept})
  endforeach()
  # The white-box declarations of these files only.
  get_property(declared GLOBAL PROPERTY RDMX_WHITE_BOX)
  set(white_box "")
  foreach(entry IN LISTS declared)
    string(REGEX REPLACE "^[^|]*\\|[^|]*\\|" "" source "${entry}")
    if(source IN_LIST files)
      list(APPEND white_box "${entry}")
    endif()
  endforeach()
  rdmx_check_includes(${what} PROGRAMS ${what} FILES ${files} WHITE_BOX ${white_box})
endfunction()

# rdmx_white_box(test layer sources...): the sources of test may include the
# private headers of layer (src/<layer>/), and must. A test that looks inside
# a layer says so here, by name, instead of passing unchecked.
function(rdmx_white_box test layer)
  get_property(layers GLOBAL PROPERTY RDMX_LAYER_NAMES)
  if(NOT layer IN_LIST layers)
    message(FATAL_ERROR "test ${test} is declared WHITE_BOX ${layer}, which is not a layer (src/CMakeLists.txt)")
  endif()
  foreach(source IN LISTS ARGN)
    cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} NORMALIZE)
    set_property(GLOBAL APPEND PROPERTY RDMX_WHITE_BOX "${test}|${layer}|${source}")
  endforeach()
endfunction()

# rdmx_declare_layer(layer [OWN_LIBRARY] USES layer...): records a layer and
# what it uses, for the graph.
function(rdmx_declare_layer layer)
  cmake_parse_arguments(D "OWN_LIBRARY" "" "USES" ${ARGN})
  set_property(GLOBAL APPEND PROPERTY RDMX_LAYER_NAMES ${layer})
  set_property(GLOBAL PROPERTY RDMX_LAYER_USES_${layer} "${D_USES}")
  set_property(GLOBAL PROPERTY RDMX_LAYER_OWN_LIBRARY_${layer} ${D_OWN_LIBRARY})
endfunction()

# rdmx_write_layer_graph(file): the declared graph as Markdown, the text
# between the layer-graph markers of docs/architecture.md (the test
# layering.graph compares them). A drawing, one row per height (a layer sits
# one row above the highest layer it uses), each layer pointing at the layers
# it uses that none of its other ones reaches; then every declared use.
function(rdmx_write_layer_graph output)
  get_property(layers GLOBAL PROPERTY RDMX_LAYER_NAMES)
  set(top 0)
  foreach(layer IN LISTS layers)
    get_property(uses GLOBAL PROPERTY RDMX_LAYER_USES_${layer})
    set(height 0)
    set(reached "")
    foreach(used IN LISTS uses)
      list(APPEND reached ${used} ${reached_${used}})
      if(NOT height GREATER height_${used})
        math(EXPR height "${height_${used}} + 1")
      endif()
    endforeach()
    list(REMOVE_DUPLICATES reached)
    set(reached_${layer} ${reached})
    set(height_${layer} ${height})
    if(height GREATER top)
      set(top ${height})
    endif()
    set(direct "")
    foreach(used IN LISTS uses)
      set(through_another FALSE)
      foreach(other IN LISTS uses)
        if(NOT other STREQUAL used AND used IN_LIST reached_${other})
          set(through_another TRUE)
        endif()
      endforeach()
      if(NOT through_another)
        list(APPEND direct ${used})
      endif()
    endforeach()
    set(direct_${layer} ${direct})
  endforeach()

  # Entries in columns as wide as the widest (its arrow counted as one).
  set(width 0)
  foreach(layer IN LISTS layers)
    set(entry_${layer} "${layer}")
    if(NOT "${direct_${layer}}" STREQUAL "")
      string(REPLACE ";" ", " direct "${direct_${layer}}")
      string(APPEND entry_${layer} " → ${direct}")
    endif()
    string(REPLACE "→" ">" shown "${entry_${layer}}")
    string(LENGTH "${shown}" length_${layer})
    if(length_${layer} GREATER width)
      set(width ${length_${layer}})
    endif()
  endforeach()
  math(EXPR width "${width} + 4")
  set(drawing "")
  foreach(height RANGE ${top} 0 -1)
    set(row "")
    set(padding "")
    foreach(layer IN LISTS layers)
      if(height_${layer} EQUAL height)
        string(APPEND row "${padding}${entry_${layer}}")
        math(EXPR spaces "${width} - ${length_${layer}}")
        string(REPEAT " " ${spaces} padding)
      endif()
    endforeach()
    string(APPEND drawing "${row}\n")
  endforeach()

  set(table "| layer | uses (includes the public headers of) |\n|---|---|\n")
  foreach(layer IN LISTS layers)
    get_property(uses GLOBAL PROPERTY RDMX_LAYER_USES_${layer})
    get_property(own GLOBAL PROPERTY RDMX_LAYER_OWN_LIBRARY_${layer})
    set(name "`${layer}`")
    if(own)
      string(APPEND name " (library `rdmx_${layer}`)")
    endif()
    list(TRANSFORM uses PREPEND "`")
    list(TRANSFORM uses APPEND "`")
    string(REPLACE ";" ", " uses "${uses}")
    if(uses STREQUAL "")
      set(uses "no other layer")
    endif()
    string(APPEND table "| ${name} | ${uses} |\n")
  endforeach()
  file(CONFIGURE OUTPUT ${output} CONTENT "```\n${drawing}```\n\n${table}" @ONLY)
endfunction()
