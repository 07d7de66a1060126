#!/bin/sh
# The .deb's and .rpm's postinst and postrm: tells a running systemd that the unit came or
# went. It enables, starts and stops nothing.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
