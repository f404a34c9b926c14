# kvpool_make_pic(TARGET): turns on position-independent code for TARGET and
# every kvpool static library it links, so that a shared object (the Python
# module, libkvpool_c.so) can link them. Imported targets are left alone.
# Executables linking the same libraries are unaffected in behaviour.
include_guard(GLOBAL)

function(kvpool_make_pic target)
  if(NOT TARGET ${target})
    return()
  endif()
  get_target_property(imported ${target} IMPORTED)
  get_target_property(type ${target} TYPE)
  if(imported OR NOT type MATCHES "STATIC_LIBRARY|OBJECT_LIBRARY")
    return()
  endif()
  get_target_property(done ${target} POSITION_INDEPENDENT_CODE)
  if(done)
    return()
  endif()
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  get_target_property(deps ${target} LINK_LIBRARIES)
  if(deps)
    foreach(dep IN LISTS deps)
      kvpool_make_pic(${dep})
    endforeach()
  endif()
endfunction()
