#!/usr/bin/env bash
# Removes the iptables rules of the pod networks of the sandboxes pinned under
# ROOT/namespaces (the CNI plugins name each sandbox in their rules' comments), and the
# chains those rules lead to. staticpod tears these down itself when it stops a pod;
# `make run-clean` calls this for pods it removes behind staticpod's back, when
# staticpod was killed rather than stopped. Usage: hack/cni-clean.sh ROOT
set -euo pipefail
root=${1:?usage: $0 ROOT}
ids=$(ls "$root/namespaces" 2>/dev/null || true)
[ -n "$ids" ] || exit 0
for tool in iptables ip6tables; do
	command -v "$tool-save" >/dev/null || continue
	saved=$("$tool-save" -t nat 2>/dev/null) || continue
	ours=""
	for id in $ids; do
		ours+=$(grep -F -- "id: \\\"$id\\\"" <<<"$saved" || true)$'\n'
	done
	# The chains the sandboxes' rules jump to (a masquerade chain, a port mapping's
	# DNAT chain), but portmap's own, which every pod shares.
	chains=$(grep -o -- '-j CNI-[A-Za-z0-9-]*' <<<"$ours" | cut -d' ' -f2 | grep -v '^CNI-HOSTPORT-' | sort -u || true)
	for c in $chains; do
		ours+=$(grep -- "^-A $c " <<<"$saved" || true)$'\n'
	done
	rules=$(grep '^-A ' <<<"$ours" | sort -u | sed 's/^-A /-D /' || true)
	[ -n "$rules" ] || continue
	{
		echo '*nat'
		echo "$rules"
		for c in $chains; do echo "-X $c"; done
		echo COMMIT
	} | "$tool-restore" --noflush
done
