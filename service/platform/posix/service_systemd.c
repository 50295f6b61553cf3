/* service_systemd.c - `commitwatch install | uninstall | start | stop` on
 * Linux: the system service is a systemd unit (the text of
 * installer/linux/commitwatch.service, kept equal to it by
 * tests/e2e/test_service.py) with the database in /var/lib/commitwatch and
 * a default configuration in /etc/commitwatch. Where systemd is not PID 1
 * (a container), the files are still written but nothing is enabled or
 * started: the command says so and exits 1.
 *
 * --root DIR writes under DIR instead of / and never calls systemctl (for
 * packaging and tests). --print-unit prints the unit and exits. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commitwatch/platform.h"

#define UNIT_PATH "/etc/systemd/system/commitwatch.service"
#define CONF_DIR "/etc/commitwatch"
#define CONF_PATH "/etc/commitwatch/commitwatch.conf"
#define STATE_DIR "/var/lib/commitwatch"

static const char unit_template[] =
    "# commitwatch.service - the Linux service: traces every process's memory\n"
    "# commits (perf_event syscall tracepoints) into /var/lib/commitwatch.\n"
    "# `commitwatch install` writes this file with @COMMITWATCH@ replaced by the\n"
    "# path of the binary. Why each capability is kept: docs/LINUX.md.\n"
    "[Unit]\n"
    "Description=commitwatch: system-wide memory-commit monitoring\n"
    "# tracefs is mounted by systemd (sys-kernel-tracing.mount) before the\n"
    "# service starts: without CAP_SYS_ADMIN it cannot mount it itself.\n"
    "Wants=sys-kernel-tracing.mount\n"
    "After=local-fs.target sys-kernel-tracing.mount\n"
    "\n"
    "[Service]\n"
    "Type=simple\n"
    "ExecStart=@COMMITWATCH@ run --source perf --config /etc/commitwatch/commitwatch.conf --db "
    "/var/lib/commitwatch/commitwatch.db\n"
    "ExecReload=/bin/kill -HUP $MAINPID\n"
    "Restart=on-failure\n"
    "RestartSec=5\n"
    "StateDirectory=commitwatch\n"
    "StateDirectoryMode=0750\n"
    "# The heap drill-down's attach loads a copy of the interposer into the\n"
    "# traced process, which must see the file: here (/run/commitwatch, readable\n"
    "# by every user), not in the unit's private /tmp.\n"
    "RuntimeDirectory=commitwatch\n"
    "RuntimeDirectoryMode=0755\n"
    "ConfigurationDirectory=commitwatch\n"
    "\n"
    "# Tracing needs (docs/RELIABILITY.md, \"Least privilege\", says how each was\n"
    "# tested): CAP_PERFMON (system-wide perf events and their tracepoints),\n"
    "# CAP_SYS_PTRACE (other users' /proc/PID/maps and smaps; the heap drill-down's\n"
    "# attach), CAP_DAC_READ_SEARCH\n"
    "# (tracefs, and the ELF files and debuginfo of every process, for stacks),\n"
    "# CAP_IPC_LOCK (perf ring buffers past kernel.perf_event_mlock_kb). Nothing\n"
    "# else: kernels before 5.8 have no CAP_PERFMON and need CAP_SYS_ADMIN\n"
    "# instead (a drop-in: docs/LINUX.md).\n"
    "CapabilityBoundingSet=CAP_PERFMON CAP_SYS_PTRACE CAP_DAC_READ_SEARCH CAP_IPC_LOCK\n"
    "NoNewPrivileges=yes\n"
    "ProtectSystem=strict\n"
    "ReadWritePaths=/var/lib/commitwatch\n"
    "ProtectHome=read-only\n"
    "PrivateTmp=yes\n"
    "PrivateDevices=yes\n"
    "DevicePolicy=closed\n"
    "PrivateMounts=yes\n"
    "PrivateNetwork=no\n"
    "ProtectKernelModules=yes\n"
    "ProtectKernelTunables=yes\n"
    "ProtectKernelLogs=yes\n"
    "ProtectControlGroups=yes\n"
    "ProtectClock=yes\n"
    "ProtectHostname=yes\n"
    "RestrictSUIDSGID=yes\n"
    "RestrictRealtime=yes\n"
    "RestrictNamespaces=yes\n"
    "LockPersonality=yes\n"
    "MemoryDenyWriteExecute=yes\n"
    "RemoveIPC=yes\n"
    "KeyringMode=private\n"
    "SystemCallArchitectures=native\n"
    "# perf_event_open is in @debug, outside @system-service, and so is ptrace\n"
    "# (the heap drill-down's attach). A call outside the list fails with EPERM\n"
    "# (and is reported) instead of killing the service.\n"
    "SystemCallFilter=@system-service perf_event_open ptrace\n"
    "SystemCallFilter=~@privileged\n"
    "SystemCallErrorNumber=EPERM\n"
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6\n"
    "UMask=0077\n"
    "LimitNOFILE=65536\n"
    "LimitMEMLOCK=infinity\n"
    "\n"
    "[Install]\n"
    "WantedBy=multi-user.target\n";

/* The unit with @COMMITWATCH@ replaced by bin. */
static void print_unit(FILE *out, const char *bin)
{
    const char *p = unit_template, *at;
    while ((at = strstr(p, "@COMMITWATCH@"))) {
        fwrite(p, 1, (size_t)(at - p), out);
        fputs(bin, out);
        p = at + strlen("@COMMITWATCH@");
    }
    fputs(p, out);
}

/* systemd is the init system: what sd_booted() checks. */
static int systemd_running(void)
{
    struct stat st;
    return lstat("/run/systemd/system", &st) == 0 && S_ISDIR(st.st_mode);
}

static void pid1_name(char *buf, size_t size)
{
    snprintf(buf, size, "unknown");
    FILE *f = fopen("/proc/1/comm", "r");
    if (!f) return;
    if (fgets(buf, (int)size, f)) buf[strcspn(buf, "\n")] = 0;
    fclose(f);
}

static int no_systemd(const char *cmd, const char *did)
{
    char init[64];
    pid1_name(init, sizeof init);
    fprintf(stderr,
            "commitwatch %s: systemd is not running on this machine (PID 1 is '%s', as in a "
            "container), so the service cannot be %s here. %s"
            "Run the daemon directly instead: commitwatch run --source perf --db " STATE_DIR
            "/commitwatch.db\n",
            cmd, init,
            strcmp(cmd, "install") == 0     ? "enabled"
            : strcmp(cmd, "uninstall") == 0 ? "disabled"
            : strcmp(cmd, "start") == 0     ? "started"
                                            : "stopped",
            did);
    return 1;
}

/* Runs systemctl with args; 0 on success, else prints and returns 1. */
static int systemctl(const char *a1, const char *a2, const char *a3)
{
    pid_t pid = fork();
    if (pid < 0) {
        perror("commitwatch: fork");
        return 1;
    }
    if (pid == 0) {
        execlp("systemctl", "systemctl", a1, a2, a3, (char *)NULL);
        fprintf(stderr, "commitwatch: cannot run systemctl: %s\n", strerror(errno));
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    fprintf(stderr, "commitwatch: `systemctl %s %s%s%s` failed\n", a1, a2 ? a2 : "", a3 ? " " : "",
            a3 ? a3 : "");
    return 1;
}

static int mkdirs(const char *path, mode_t mode)
{
    char tmp[PATH_MAX];
    cw_strlcpy(tmp, path, sizeof tmp);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(tmp, mode) != 0 && errno != EEXIST) return -1;
    return 0;
}

static int write_file(const char *path, int (*fill)(FILE *, const char *), const char *arg)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "commitwatch install: cannot write %s: %s%s\n", path, strerror(errno),
                errno == EACCES || errno == EROFS ? " (run as root: sudo commitwatch install)"
                                                  : "");
        return 1;
    }
    int rc = fill(f, arg);
    if (fclose(f) != 0) rc = 1;
    if (rc || rename(tmp, path) != 0) {
        fprintf(stderr, "commitwatch install: writing %s failed: %s\n", path, strerror(errno));
        unlink(tmp);
        return 1;
    }
    chmod(path, 0644);
    return 0;
}

static int fill_unit(FILE *f, const char *bin)
{
    print_unit(f, bin);
    return ferror(f) ? 1 : 0;
}

static int (*config_writer)(FILE *f);

static int fill_conf(FILE *f, const char *unused)
{
    (void)unused;
    return config_writer && config_writer(f) == 0 ? 0 : 1;
}

static const char usage_text[] =
    "usage: commitwatch install [--root DIR] [--print-unit | --print-config]\n"
    "       commitwatch uninstall [--root DIR]\n"
    "       commitwatch start | stop\n\n"
    "install    writes " UNIT_PATH " (hardened systemd unit),\n"
    "           " CONF_PATH " (if missing) and " STATE_DIR ", then enables the service\n"
    "uninstall  stops and disables the service and removes the unit (the database and the\n"
    "           configuration stay)\n"
    "start, stop  start or stop the installed service\n\n"
    "  --root DIR    write under DIR instead of / and do not call systemctl (packaging)\n"
    "  --print-unit  print the unit file and exit\n"
    "  --print-config  print the default configuration file and exit\n";

const char *cw_plat_service_usage(void)
{
    return usage_text;
}

int cw_plat_service(const char *cmd, const cw_plat_service_opts_t *o)
{
    const char *root = o->root ? o->root : "";
    config_writer = o->write_config;
    char bin[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", bin, sizeof bin - 1);
    if (n <= 0)
        snprintf(bin, sizeof bin, "/usr/bin/commitwatch");
    else
        bin[n] = 0;
    if (o->msi) {
        fprintf(stderr, "commitwatch install: --msi is for the Windows installer\n");
        return 2;
    }
    if (o->print_unit) {
        print_unit(stdout, bin);
        return 0;
    }
    char unit[PATH_MAX], confdir[PATH_MAX], conf[PATH_MAX], state[PATH_MAX];
    snprintf(unit, sizeof unit, "%s" UNIT_PATH, root);
    snprintf(confdir, sizeof confdir, "%s" CONF_DIR, root);
    snprintf(conf, sizeof conf, "%s" CONF_PATH, root);
    snprintf(state, sizeof state, "%s" STATE_DIR, root);
    int staged = root[0] != 0;

    if (strcmp(cmd, "install") == 0) {
        char unitdir[PATH_MAX];
        snprintf(unitdir, sizeof unitdir, "%s/etc/systemd/system", root);
        if (mkdirs(unitdir, 0755) || mkdirs(confdir, 0755) || mkdirs(state, 0750)) {
            fprintf(stderr, "commitwatch install: cannot create directories under '%s/': %s%s\n",
                    root, strerror(errno), errno == EACCES ? " (run as root)" : "");
            return 1;
        }
        if (write_file(unit, fill_unit, bin)) return 1;
        printf("wrote %s\n", unit);
        if (access(conf, F_OK) != 0) {
            if (write_file(conf, fill_conf, NULL)) return 1;
            printf("wrote %s (default configuration)\n", conf);
        } else {
            printf("kept %s\n", conf);
        }
        printf("database: %s/commitwatch.db\n", state);
        if (staged) return 0;
        if (!systemd_running())
            return no_systemd(cmd, "The unit file and the configuration were written; "
                                   "on a machine with systemd, `commitwatch install` enables it. ");
        if (systemctl("daemon-reload", NULL, NULL) ||
            systemctl("enable", "commitwatch.service", NULL))
            return 1;
        printf("enabled commitwatch.service; start it with `commitwatch start`\n");
        return 0;
    }
    if (strcmp(cmd, "uninstall") == 0) {
        int sd = !staged && systemd_running();
        if (sd && systemctl("disable", "--now", "commitwatch.service")) return 1;
        if (unlink(unit) != 0 && errno != ENOENT) {
            fprintf(stderr, "commitwatch uninstall: cannot remove %s: %s\n", unit, strerror(errno));
            return 1;
        }
        printf("removed %s (kept %s and %s)\n", unit, conf, state);
        if (staged) return 0;
        if (!sd) return no_systemd(cmd, "The unit file was removed. ");
        return systemctl("daemon-reload", NULL, NULL);
    }
    /* start, stop */
    if (!systemd_running()) return no_systemd(cmd, "");
    if (access(UNIT_PATH, F_OK) != 0) {
        fprintf(stderr,
                "commitwatch %s: the service is not installed (run `commitwatch install`)\n", cmd);
        return 1;
    }
    return systemctl(cmd, "commitwatch.service", NULL);
}

/* systemd runs the daemon as a plain process: nothing to hand over. */
int cw_plat_service_dispatch(const cw_plat_service_hooks_t *h, int *run_rc)
{
    (void)h;
    (void)run_rc;
    return CW_ENOSYS;
}
