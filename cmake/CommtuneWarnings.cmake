# Warnings for commtune's own code. Third-party headers (torch, Qt) come in as
# SYSTEM includes so their warnings do not drown ours.
function(commtune_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor
                              -Wno-unknown-pragmas>)
endfunction()
