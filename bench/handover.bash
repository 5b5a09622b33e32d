# bench/handover.bash - the hand-over measurement, shared by the bench
# scripts.  Needs LEASERUN (the binary) and tmp (a scratch directory).
#
# handover URL LABEL: 20 waiters queue behind one holder on one name; each
# holds the lease for 50 ms.  Prints the median, min and max of the 20
# gaps "previous holder's command ended -> next command started" (bash's
# $EPOCHREALTIME, the last and the first thing the commands do), and,
# from leaserun's own -v JSON log (1 ms resolution), "exited" of one
# holder -> "acquired" of the next: the part that leaserun and the store
# control (release, wake-up, acquire), without the commands' process
# start and exit.

# handover URL LABEL: 20 waiters behind one holder on one name.
handover() {
	local u=$1 label=$2 name="ho-$RANDOM" pids p
	: >"$tmp/starts"
	: >"$tmp/ends"
	# Times come from bash's $EPOCHREALTIME (no date process): the first
	# and the last thing each command does.
	: >"$tmp/log"
	"$LEASERUN" -v --log-format json -U "$u" "$name" \
		bash -c "sleep 1; echo \$EPOCHREALTIME >> '$tmp/ends'" 2>>"$tmp/log" &
	pids=$!
	sleep 0.2
	for _ in $(seq 20); do
		"$LEASERUN" -v --log-format json -w 60 -U "$u" "$name" bash -c \
			"echo \$EPOCHREALTIME >> '$tmp/starts'; sleep 0.05; echo \$EPOCHREALTIME >> '$tmp/ends'" \
			2>>"$tmp/log" &
		pids="$pids $!"
	done
	for p in $pids; do
		wait "$p"
	done
	sort -n "$tmp/starts" >"$tmp/s"
	sort -n "$tmp/ends" | head -n 20 >"$tmp/e"
	paste "$tmp/s" "$tmp/e" | awk '{ print ($1 - $2) * 1000 }' | sort -n |
		awk -v label="$label" '{ g[NR] = $1 }
		END {
			m = NR % 2 ? g[(NR + 1) / 2] : (g[NR / 2] + g[NR / 2 + 1]) / 2
			printf "hand-over %-6s median %.2f ms, min %.2f ms, max %.2f ms (%d gaps)\n",
				label, m, g[1], g[NR], NR
		}'
	# The store's part: "exited" (the holder saw its command end) logged
	# by one leaserun -> "acquired" logged by the next, which covers the
	# release, the wake-up and the acquire (log times have 1 ms
	# resolution).
	sed -n 's/^{"time":"[^T]*T\([0-9]*\):\([0-9]*\):\([0-9.]*\)Z".*"event":"\(exited\|acquired\)".*/\1 \2 \3 \4/p' \
		"$tmp/log" | awk '{ printf "%.0f %s\n", ($1 * 3600 + $2 * 60 + $3) * 1000, $4 }' |
		sort -n -s -k1,1 | awk -v label="$label" '
		$2 == "exited" { r = $1; have = 1; next }
		$2 == "acquired" && have { g[++n] = $1 - r; have = 0 }
		END {
			for (i = 1; i <= n; i++)
				for (j = i + 1; j <= n; j++)
					if (g[j] < g[i]) { t = g[i]; g[i] = g[j]; g[j] = t }
			m = n % 2 ? g[(n + 1) / 2] : (g[n / 2] + g[n / 2 + 1]) / 2
			printf "  leaserun only (exited -> next acquired): median %d ms, max %d ms (%d gaps)\n",
				m, g[n], n
		}'
}
