# package.cmake - the Linux package: a .deb through CPack (`cpack -G DEB`
# in a build folder; scripts/package_deb.sh does it from scratch).
#
# It holds the binary, the hardened systemd unit (installer/linux/
# commitwatch.service with the packaged binary's path), the default
# configuration as a conffile (written by the binary itself:
# `commitwatch install --print-config`), the dashboard with uPlot, and the
# default stack tags; postinst creates /var/lib/commitwatch and enables and
# starts the service where systemd runs, prerm stops it
# (installer/linux/deb/). The binary finds its data beside itself
# (BINDIR/../share/commitwatch), so the package works wherever CPack's
# prefix puts it.
#
# It also holds what Debian asks of a package (lintian checks it: tests/
# e2e/test_deb_root.py): the binary stripped, its debug symbols in a
# separate commitwatch-dbgsym_*.ddeb (matched by build-id, for gdb); a
# man page commitwatch(1) generated from the help texts with help2man
# (scripts/manpage.sh); /usr/share/doc/commitwatch/changelog.gz for the
# version, dated by SOURCE_DATE_EPOCH (else the last commit's date) so that
# two builds of one commit are the same; /usr/share/doc/commitwatch/
# copyright (machine-readable: commitwatch's own, and the vendored front-end
# packages' licences, read from web/node_modules); maintainer scripts in
# debhelper's pattern (deb-systemd-helper, deb-systemd-invoke).
#
# CW_MAINTAINER (a cache variable, set in CMakeLists.txt) names the
# package's maintainer, "Name <address>": the .deb's Maintainer field and
# its changelog entry (and the MSI's Manufacturer, cmake/msi.cmake). Its
# default is a placeholder; whoever publishes the packages sets their own
# (-DCW_MAINTAINER="Jane Doe <jane@example.com>").
set(CW_PKG_PREFIX /usr)
set(CW_PKG_DIR ${PROJECT_BINARY_DIR}/package)
file(READ ${PROJECT_SOURCE_DIR}/installer/linux/commitwatch.service cw_unit)
string(REPLACE "@COMMITWATCH@" "${CW_PKG_PREFIX}/bin/commitwatch" cw_unit "${cw_unit}")
file(WRITE ${CW_PKG_DIR}/commitwatch.service "${cw_unit}")
add_custom_command(
  OUTPUT ${CW_PKG_DIR}/commitwatch.conf
  COMMAND commitwatch install --print-config > ${CW_PKG_DIR}/commitwatch.conf
  DEPENDS commitwatch
  COMMENT "Writing the default configuration for the package"
  VERBATIM)

# The date of this build's changelog entry and man page: SOURCE_DATE_EPOCH
# when the builder sets it (reproducible-builds.org), else the last
# commit's, else a fixed one; never the time of the build.
if(DEFINED ENV{SOURCE_DATE_EPOCH})
  set(CW_PKG_EPOCH $ENV{SOURCE_DATE_EPOCH})
else()
  execute_process(COMMAND git -C ${PROJECT_SOURCE_DIR} log -1 --format=%ct
                  OUTPUT_VARIABLE CW_PKG_EPOCH OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT CW_PKG_EPOCH MATCHES "^[0-9]+$")
    set(CW_PKG_EPOCH 1767225600)
  endif()
endif()
set(ENV{SOURCE_DATE_EPOCH} ${CW_PKG_EPOCH})
string(TIMESTAMP cw_pkg_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
unset(ENV{SOURCE_DATE_EPOCH})

# changelog.gz: a native package (no Debian revision), one entry.
file(WRITE ${CW_PKG_DIR}/changelog
     "commitwatch (${PROJECT_VERSION}) unstable; urgency=medium\n\n"
     "  * commitwatch ${PROJECT_VERSION}, packaged from its sources.\n\n"
     " -- ${CW_MAINTAINER}  ${cw_pkg_date}\n")

# copyright: commitwatch's own, then one paragraph per vendored front-end
# package with its LICENSE (Apache-2.0 refers to Debian's copy of it).
file(READ ${PROJECT_SOURCE_DIR}/installer/linux/deb/copyright cw_copyright)
set(cw_vendor_licenses "uplot=Expat;d3-flame-graph=Apache-2.0;d3-ease=BSD-3-Clause")
foreach(pkg ${CW_WEB_VENDORS})
  set(lic ISC)
  foreach(pair ${cw_vendor_licenses})
    if(pair MATCHES "^${pkg}=(.*)$")
      set(lic ${CMAKE_MATCH_1})
    endif()
  endforeach()
  file(STRINGS ${PROJECT_SOURCE_DIR}/web/node_modules/${pkg}/LICENSE cw_holders REGEX "^ *Copyright [^{]*$")
  if(NOT cw_holders)
    file(READ ${PROJECT_SOURCE_DIR}/web/node_modules/${pkg}/package.json cw_pkg_json)
    string(JSON cw_author ERROR_VARIABLE cw_err GET "${cw_pkg_json}" author)
    set(cw_holders "${cw_author}")
  endif()
  list(TRANSFORM cw_holders REPLACE "^ *Copyright +(\\(c\\) +)?" "")
  list(JOIN cw_holders "\n " cw_holders)
  string(APPEND cw_copyright "\nFiles: usr/share/commitwatch/web/vendor/${pkg}/*\nCopyright: ${cw_holders}\nLicense: ${lic}\n")
  if(lic STREQUAL "Apache-2.0")
    string(APPEND cw_copyright " On Debian systems, the full text of the Apache License, Version 2.0\n"
           " is in /usr/share/common-licenses/Apache-2.0.\n")
  else()
    file(STRINGS ${PROJECT_SOURCE_DIR}/web/node_modules/${pkg}/LICENSE cw_text)
    foreach(line IN LISTS cw_text)
      if(line STREQUAL "")
        string(APPEND cw_copyright " .\n")
      else()
        string(APPEND cw_copyright " ${line}\n")
      endif()
    endforeach()
  endif()
endforeach()
file(WRITE ${CW_PKG_DIR}/copyright "${cw_copyright}")

# The man page, from the binary's help texts; then both texts gzipped
# without names or times (gzip -9n), as Debian wants them.
find_program(CW_HELP2MAN help2man)
if(NOT CW_HELP2MAN)
  message(FATAL_ERROR "help2man writes the package's man page: apt-get install help2man, or scripts/deps.sh")
endif()
add_custom_command(
  OUTPUT ${CW_PKG_DIR}/commitwatch.1.gz ${CW_PKG_DIR}/changelog.gz
  COMMAND ${CMAKE_COMMAND} -E env SOURCE_DATE_EPOCH=${CW_PKG_EPOCH}
          ${PROJECT_SOURCE_DIR}/scripts/manpage.sh $<TARGET_FILE:commitwatch> ${CW_PKG_DIR}/commitwatch.1
  COMMAND gzip -9nf ${CW_PKG_DIR}/commitwatch.1
  COMMAND gzip -9nc ${CW_PKG_DIR}/changelog > ${CW_PKG_DIR}/changelog.gz
  DEPENDS commitwatch ${PROJECT_SOURCE_DIR}/scripts/manpage.sh ${CW_PKG_DIR}/changelog
  COMMENT "Writing the package's man page and changelog"
  VERBATIM)
add_custom_target(cw_package_files ALL DEPENDS ${CW_PKG_DIR}/commitwatch.conf ${CW_PKG_DIR}/commitwatch.1.gz
                  ${CW_PKG_DIR}/changelog.gz)
install(FILES ${CW_PKG_DIR}/commitwatch.service DESTINATION lib/systemd/system COMPONENT service)
install(FILES ${CW_PKG_DIR}/commitwatch.conf DESTINATION /etc/commitwatch COMPONENT service)
install(FILES ${CW_PKG_DIR}/commitwatch.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${CW_PKG_DIR}/changelog.gz ${CW_PKG_DIR}/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME commitwatch)
set(CPACK_PACKAGE_VENDOR "commitwatch")
set(CPACK_PACKAGE_CONTACT "${CW_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "continuous, system-wide memory-commit monitoring")
# The extended description, wrapped at 80 columns (lintian's limit).
set(CPACK_PACKAGE_DESCRIPTION
    "commitwatch traces mmap, munmap, mremap, brk and mprotect of every process\n"
    "with user stacks, attributes each commit to a stack tag, stores\n"
    "time-bucketed figures in SQLite and serves a REST API, Prometheus /metrics\n"
    "and a dashboard.")
string(CONCAT CPACK_PACKAGE_DESCRIPTION ${CPACK_PACKAGE_DESCRIPTION})
set(CPACK_PACKAGING_INSTALL_PREFIX ${CW_PKG_PREFIX})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The maintainer scripts call deb-systemd-helper unguarded, as debhelper's do.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "init-system-helpers (>= 1.54~)")
# The binary is stripped; its debug symbols go to commitwatch-dbgsym_*.ddeb.
# (CPackDeb strips what it finds unstripped, so CPACK_STRIP_FILES stays off.)
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
# ... and cmake/dbgsym_fix.cmake mends that .ddeb afterwards.
set(CPACK_POST_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/dbgsym_fix.cmake)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/installer/linux/deb/postinst
    ${PROJECT_SOURCE_DIR}/installer/linux/deb/prerm
    ${PROJECT_SOURCE_DIR}/installer/linux/deb/postrm
    ${PROJECT_SOURCE_DIR}/installer/linux/deb/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
