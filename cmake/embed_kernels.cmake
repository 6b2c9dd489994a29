# Writes OUT: a C++ file defining tl::kernelSource(), the OpenCL C of SOURCES
# concatenated (common.cl first). Run at build time: cmake -DOUT=.. -DSOURCES=.. -P this
string(REPLACE "," ";" SOURCES "${SOURCES}")
set(body "")
foreach(f IN LISTS SOURCES)
  file(READ "${f}" text)
  get_filename_component(name "${f}" NAME)
  string(APPEND body "    \"// ---- ${name}\\n\"\n    R\"tl_cl(${text})tl_cl\"\n")
endforeach()
file(WRITE "${OUT}.tmp" "// Generated from kernels/*.cl by cmake/embed_kernels.cmake. Do not edit.\n#include \"runtime/kernel_library.h\"\n\nnamespace tl {\n\nconst char* kernelSource() {\n  return\n${body}  ;\n}\n\n}  // namespace tl\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
