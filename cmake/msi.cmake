# msi.cmake - the Windows installer, part of the Windows build: target
# `msi` (built by default) runs scripts/build_msi.sh, which stages
# commitwatch.exe, the dashboard with uPlot, the default stack tags and the
# Windows MemoryTestApp (tools\), and builds
# commitwatch-VERSION-x64.msi with wixl from installer/windows/commitwatch.wxs.
# Its version is the project's, its Manufacturer the name in CW_MAINTAINER
# (the .deb's maintainer, CMakeLists.txt), without the address.
find_program(CW_WIXL wixl)
find_program(CW_WIXL_HEAT wixl-heat)
if(NOT CW_WIXL OR NOT CW_WIXL_HEAT)
  message(FATAL_ERROR "wixl and wixl-heat (Debian package wixl) build the MSI: apt-get install wixl, "
                      "or scripts/deps.sh --windows")
endif()
string(REGEX REPLACE " *<[^>]*> *$" "" CW_MSI_MANUFACTURER "${CW_MAINTAINER}")
set(CW_MSI ${PROJECT_BINARY_DIR}/commitwatch-${PROJECT_VERSION}-x64.msi)
set(CW_MSI_TOOLS "")
set(CW_MSI_DEPS commitwatch)
if(TARGET memorytestapp)
  list(APPEND CW_MSI_TOOLS $<TARGET_FILE:memorytestapp>)
  list(APPEND CW_MSI_DEPS memorytestapp)
endif()
add_custom_command(
  OUTPUT ${CW_MSI}
  COMMAND ${CMAKE_COMMAND} -E env "CW_MSI_MANUFACTURER=${CW_MSI_MANUFACTURER}"
          ${PROJECT_SOURCE_DIR}/scripts/build_msi.sh $<TARGET_FILE:commitwatch> ${PROJECT_VERSION} ${CW_MSI}
          ${CW_MSI_TOOLS}
  DEPENDS ${CW_MSI_DEPS} ${PROJECT_SOURCE_DIR}/installer/windows/commitwatch.wxs
          ${PROJECT_SOURCE_DIR}/scripts/build_msi.sh
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
  COMMENT "Building ${CW_MSI}"
  VERBATIM)
add_custom_target(msi ALL DEPENDS ${CW_MSI})
