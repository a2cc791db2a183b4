# Warning flags for the project's own code. Generated protobuf-c code gets none of these.
set(DFC_WARNINGS
    -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes
    -Wno-unused-parameter -Wvla -Wpointer-arith -Wundef)
if(DFC_WERROR)
  list(APPEND DFC_WARNINGS -Werror)
endif()

# dfc_target_defaults(target): warnings and hidden visibility for a target of ours.
function(dfc_target_defaults target)
  target_compile_options(${target} PRIVATE ${DFC_WARNINGS})
  set_target_properties(${target} PROPERTIES C_VISIBILITY_PRESET hidden)
endfunction()
