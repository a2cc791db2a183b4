# -DDFC_SANITIZE=address,undefined or -DDFC_SANITIZE=thread applies to every target.
if(DFC_SANITIZE)
  message(STATUS "Sanitizers: ${DFC_SANITIZE}")
  add_compile_options(-fsanitize=${DFC_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${DFC_SANITIZE})
  add_compile_definitions(DFC_SANITIZED=1)
endif()
