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
add_custom_target(cw_package_files ALL DEPENDS ${CW_PKG_DIR}/commitwatch.conf)
install(FILES ${CW_PKG_DIR}/commitwatch.service DESTINATION lib/systemd/system COMPONENT service)
install(FILES ${CW_PKG_DIR}/commitwatch.conf DESTINATION /etc/commitwatch COMPONENT service)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME commitwatch)
set(CPACK_PACKAGE_VENDOR "commitwatch")
set(CPACK_PACKAGE_CONTACT "commitwatch developers <commitwatch@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "continuous, system-wide memory-commit monitoring")
set(CPACK_PACKAGE_DESCRIPTION
    "commitwatch traces mmap, munmap, mremap, brk and mprotect of every process with user stacks, attributes each commit to a stack tag, stores time-bucketed figures in SQLite and serves a REST API, Prometheus /metrics and a dashboard.")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CW_PKG_PREFIX})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/installer/linux/deb/postinst
    ${PROJECT_SOURCE_DIR}/installer/linux/deb/prerm
    ${PROJECT_SOURCE_DIR}/installer/linux/deb/postrm
    ${PROJECT_SOURCE_DIR}/installer/linux/deb/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
