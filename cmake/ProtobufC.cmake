# dfc_protobuf_c(VAR root file...): generates .pb-c.{c,h} for each .proto (paths relative to
# root) into the current binary dir and appends the generated .c files to VAR.
find_program(PROTOC_C protoc-c REQUIRED)

function(dfc_protobuf_c var root)
  set(srcs)
  foreach(proto ${ARGN})
    string(REGEX REPLACE "\\.proto$" "" base ${proto})
    set(c ${CMAKE_CURRENT_BINARY_DIR}/${base}.pb-c.c)
    set(h ${CMAKE_CURRENT_BINARY_DIR}/${base}.pb-c.h)
    add_custom_command(
      OUTPUT ${c} ${h}
      COMMAND ${PROTOC_C} -I${root} --c_out=${CMAKE_CURRENT_BINARY_DIR} ${root}/${proto}
      DEPENDS ${root}/${proto}
      COMMENT "protoc-c ${proto}"
      VERBATIM)
    list(APPEND srcs ${c})
  endforeach()
  set(${var} ${srcs} PARENT_SCOPE)
endfunction()
