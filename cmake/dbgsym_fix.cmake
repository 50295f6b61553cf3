# dbgsym_fix.cmake - run by CPack after it built the packages
# (CPACK_POST_BUILD_SCRIPTS, cmake/package.cmake): mends the
# commitwatch-dbgsym .ddeb as Debian's own -dbgsym packages are. CMake 3.25
# writes the build folder's absolute paths into the .ddeb's md5sums (dpkg
# --verify and lintian then find none of its files), and the package has no
# /usr/share/doc entry: Debian's point to the main package's
# (usr/share/doc/commitwatch-dbgsym -> commitwatch), whose copyright and
# changelog cover it, as the .ddeb depends on that exact version.
foreach(pkg IN LISTS CPACK_PACKAGE_FILES)
  if(NOT pkg MATCHES "-dbgsym_.*\\.ddeb$")
    continue()
  endif()
  set(dir ${pkg}.d)
  file(REMOVE_RECURSE ${dir})
  execute_process(COMMAND dpkg-deb -R ${pkg} ${dir} COMMAND_ERROR_IS_FATAL ANY)
  file(STRINGS ${dir}/DEBIAN/md5sums sums)
  set(fixed "")
  foreach(line IN LISTS sums)
    string(REGEX REPLACE "^([0-9a-f]+)  .*/(usr/lib/debug/.*)$" "\\1  \\2" line "${line}")
    string(APPEND fixed "${line}\n")
  endforeach()
  file(WRITE ${dir}/DEBIAN/md5sums "${fixed}")
  # Symbol files are data, not programs.
  file(GLOB_RECURSE debug_files ${dir}/usr/lib/debug/*.debug)
  if(debug_files)
    file(CHMOD ${debug_files} PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  endif()
  file(MAKE_DIRECTORY ${dir}/usr/share/doc)
  file(CREATE_LINK commitwatch ${dir}/usr/share/doc/commitwatch-dbgsym SYMBOLIC)
  execute_process(COMMAND dpkg-deb --root-owner-group -Zxz -b ${dir} ${pkg}
                  OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
  file(REMOVE_RECURSE ${dir})
endforeach()
