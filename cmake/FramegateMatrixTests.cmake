# framegate_add_matrix_tests: registers each cell of a framegate matrix as one CTest test,
# so that `ctest -L bf16` runs the bf16 cells and CTest's resource groups schedule GPU
# cells one per GPU.
#
#   include(FramegateMatrixTests)
#   framegate_add_matrix_tests(MATRIX <file | shipped name> LABEL_PREFIX <prefix>
#                              [FRAMEGATE <executable target>]   # default: framegate
#                              [FILTER <expr>]                   # as `framegate list --filter`
#                              [EXTRA_ARGS <arg>...]             # appended to each `check`
#                              [PROPERTIES <name> <value>...])   # set on every test
#
# The cells come from `framegate list MATRIX --json -`, which runs when the target
# <prefix>_matrix_tests is built (after the framegate executable, like
# gtest_discover_tests), so the expansion is framegate's own and "cuda"/"all" expand to
# the devices of the build host. Each test runs
#   framegate check --size S|--model DIR --policy P --device D --seed N [--fault F]
#                   [--sampler S] [--steps N] [--guidance G] [--tolerance T]
#                   [--xfail REASON] EXTRA_ARGS
# and is named <prefix>/<pipeline>/<device>/<policy>/seed=N[/fault=F]... Properties:
#   LABELS           <prefix>, the device, the policy, the size (or model:<name>)
#   RESOURCE_GROUPS  "gpus:1,cudaN:1" for a cell on cuda:N: a slot of the GPU pool (one
#                    cell per GPU at a time) and its own GPU's slot (it runs on the GPU
#                    the matrix names). Use with `ctest --resource-spec-file FILE`, FILE
#                    written by runners/ctest/make_resource_spec.py.
#   TIMEOUT          the matrix's `timeout`
#   DISABLED         cells UNSUPPORTED on the build host (reported "Not Run", no failure)
# An xfail cell passes its reason to `check --xfail`, which turns a caught failure into
# XFAIL (exit 0) and a pass into XPASS (exit 1). The matrix's repeats/warmup are not
# passed: CTest gives pass/fail, `framegate run` keeps the timings.

set(_FRAMEGATE_MATRIX_TESTS_SCRIPT "${CMAKE_CURRENT_LIST_FILE}")

function(framegate_add_matrix_tests)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "MATRIX;LABEL_PREFIX;FRAMEGATE;FILTER"
                        "EXTRA_ARGS;PROPERTIES")
  if(NOT arg_MATRIX OR NOT arg_LABEL_PREFIX)
    message(FATAL_ERROR "framegate_add_matrix_tests: MATRIX and LABEL_PREFIX are required")
  endif()
  if(NOT arg_FRAMEGATE)
    set(arg_FRAMEGATE framegate)
  endif()
  if(NOT TARGET ${arg_FRAMEGATE})
    message(FATAL_ERROR "framegate_add_matrix_tests: '${arg_FRAMEGATE}' is not a target")
  endif()
  set(matrix "${arg_MATRIX}")
  set(depends ${arg_FRAMEGATE})
  if(EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/${matrix}")
    get_filename_component(matrix "${CMAKE_CURRENT_SOURCE_DIR}/${matrix}" ABSOLUTE)
  endif()
  if(EXISTS "${matrix}")
    list(APPEND depends "${matrix}")
  endif()
  string(MAKE_C_IDENTIFIER "${arg_LABEL_PREFIX}" id)
  set(tests_file "${CMAKE_CURRENT_BINARY_DIR}/${id}_matrix_tests.cmake")
  add_custom_command(
    OUTPUT "${tests_file}"
    COMMAND "${CMAKE_COMMAND}"
            -D "FRAMEGATE_EXE=$<TARGET_FILE:${arg_FRAMEGATE}>"
            -D "MATRIX=${matrix}"
            -D "FILTER=${arg_FILTER}"
            -D "PREFIX=${arg_LABEL_PREFIX}"
            -D "EXTRA_ARGS=${arg_EXTRA_ARGS}"
            -D "PROPERTIES=${arg_PROPERTIES}"
            -D "OUT=${tests_file}"
            -P "${_FRAMEGATE_MATRIX_TESTS_SCRIPT}"
    DEPENDS ${depends} "${_FRAMEGATE_MATRIX_TESTS_SCRIPT}"
    COMMENT "Listing the cells of ${arg_MATRIX} as CTest tests"
    VERBATIM)
  add_custom_target(${id}_matrix_tests ALL DEPENDS "${tests_file}")
  # CTest reads this at test time: the generated tests, or a placeholder that fails.
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${id}_matrix_include.cmake")
  file(WRITE "${include_file}"
       "if(EXISTS \"${tests_file}\")\n"
       "  include(\"${tests_file}\")\n"
       "else()\n"
       "  add_test(${id}_NOT_BUILT ${id}_NOT_BUILT)\n"
       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()

# --- Script mode (cmake -P): turns `framegate list --json` into add_test() calls. ---
if(CMAKE_SCRIPT_MODE_FILE AND OUT)
  set(list_args list "${MATRIX}" --json -)
  if(FILTER)
    list(APPEND list_args --filter "${FILTER}")
  endif()
  execute_process(COMMAND "${FRAMEGATE_EXE}" ${list_args}
                  OUTPUT_VARIABLE json ERROR_VARIABLE error RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "framegate list ${MATRIX} failed (${rc}): ${error}")
  endif()
  string(JSON timeout GET "${json}" timeout_seconds)
  string(JSON count LENGTH "${json}" cells)
  set(script "# Generated from `framegate list ${MATRIX} --json -`: ${count} cells.\n")
  if(count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      string(JSON cell GET "${json}" cells ${i})
      foreach(key pipeline model_dir device policy seed fault sampler steps guidance tolerance
                  xfail unsupported)
        string(JSON ${key} GET "${cell}" ${key})
      endforeach()
      string(JSON size_type TYPE "${cell}" size)
      set(name "${PREFIX}/${pipeline}/${device}/${policy}/seed=${seed}")
      if(size_type STREQUAL "NULL")
        set(args check --model "${model_dir}")
        set(size_label "${pipeline}")
      else()
        string(JSON size GET "${cell}" size)
        set(args check --size "${size}")
        set(size_label "${size}")
      endif()
      list(APPEND args --policy "${policy}" --device "${device}" --seed "${seed}")
      foreach(option fault sampler)
        if(NOT "${${option}}" STREQUAL "")
          list(APPEND args "--${option}" "${${option}}")
          string(APPEND name "/${option}=${${option}}")
        endif()
      endforeach()
      foreach(option steps guidance)
        if(NOT "${${option}}" EQUAL 0)
          list(APPEND args "--${option}" "${${option}}")
          string(APPEND name "/${option}=${${option}}")
        endif()
      endforeach()
      foreach(option tolerance xfail)
        if(NOT "${${option}}" STREQUAL "")
          list(APPEND args "--${option}" "${${option}}")
        endif()
      endforeach()
      list(APPEND args ${EXTRA_ARGS})
      set(command "[==[${FRAMEGATE_EXE}]==]")
      foreach(a IN LISTS args)
        string(APPEND command " [==[${a}]==]")
      endforeach()
      set(labels "${PREFIX};${device};${policy};${size_label}")
      set(props "LABELS [==[${labels}]==]")
      if(device MATCHES "^cuda")
        string(REPLACE "cuda:" "cuda" pool "${device}")
        string(APPEND props " RESOURCE_GROUPS [==[gpus:1,${pool}:1]==]")
      endif()
      if(timeout GREATER 0)
        string(APPEND props " TIMEOUT ${timeout}")
      endif()
      foreach(p IN LISTS PROPERTIES)
        string(APPEND props " [==[${p}]==]")
      endforeach()
      if(NOT unsupported STREQUAL "")
        string(APPEND props " DISABLED TRUE")
        string(APPEND script "# UNSUPPORTED here: ${unsupported}\n")
      endif()
      string(APPEND script "add_test([==[${name}]==] ${command})\n"
                           "set_tests_properties([==[${name}]==] PROPERTIES ${props})\n")
    endforeach()
  endif()
  file(WRITE "${OUT}" "${script}")
endif()
