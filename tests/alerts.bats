#!/usr/bin/env bats
# The Prometheus rules and the Grafana dashboard of contrib/: promtool
# loads the rules and runs their tests, and every metric they and the
# dashboard name is one that leaserun writes, as read from a metrics file
# that real runs wrote (a rule on a misspelt metric never fires, and
# nothing says so).

load helpers

RULES=$LR_SRCDIR/contrib/prometheus/leaserun.rules.yml
RULES_TEST=$LR_SRCDIR/contrib/prometheus/leaserun.rules.test.yml
DASHBOARD=$LR_SRCDIR/contrib/grafana/leaserun.json

# ran WANT CMD...: runs CMD, which must exit WANT.
ran() {
	local want=$1 rc=0
	shift
	"$@" || rc=$?
	[ "$rc" = "$want" ] && return 0
	echo "exit $rc, not $want: $*" >&2
	return 1
}

# One metrics file for the whole file, from real runs on the file store:
# a success, a command that fails, a conflict, a lease lost (--break),
# leaserun's own failure (a lock directory that does not exist: 125),
# renewals, a run --once-per holds back and one --max-time stops.
setup_file() {
	: "${LR_SRCDIR:?LR_SRCDIR must name the source directory (make check sets it)}"
	command -v promtool >/dev/null ||
		{ echo "promtool is not installed (Debian: prometheus)" >&2; return 1; }
	command -v jq >/dev/null || { echo "jq is not installed" >&2; return 1; }
	local d=$BATS_FILE_TMPDIR pid
	M=$d/textfile/leaserun.prom
	export M
	mkdir "$d/textfile" "$d/locks"
	set -- -U "file://$d/locks" --metrics-file "$M"
	ran 0 lr "$@" nightly true
	ran 3 lr "$@" report sh -c 'exit 3'
	ran 125 lr -U "file://$d/no-such-dir" --metrics-file "$M" broken true
	lr "$@" -t 1s deploy sleep 10 &
	pid=$!
	wait_until 5 lr -U "file://$d/locks" --status deploy >/dev/null
	ran 1 lr "$@" -n deploy true
	lr -q -U "file://$d/locks" --break deploy
	ran 124 wait "$pid"
	ran 0 lr "$@" -t 1s --renew 100ms -k 300ms renewing sleep 0.5
	ran 0 lr "$@" --once-per 1h hourly true
	ran 1 lr "$@" --once-per 1h hourly true
	ran 124 lr "$@" --max-time 200ms slow sleep 5
}

# The names of the samples in the metrics file: leaserun_..._bucket and
# the like, as PromQL selects them.
written() {
	grep -v '^#' "$M" | sed 's/[{ ].*//' | sort -u
}

# The per-job series the rules' header tells the operator to record: the
# record: lines of its commented example.
recorded() {
	sed -n '/^#   groups:$/,/^#$/p' "$1" | sed -n 's/^# *- record: *//p' | sort -u
}

# The example itself, as a rules file.
recorded_example() {
	sed -n '/^#   groups:$/,/^#$/p' "$1" | sed -e '$d' -e 's/^# //'
}

# The expr: of each rule of a rules file, a line "---" after each: plain
# ("expr: up > 0") or a block ("expr: |" and the lines indented more).
rule_exprs() {
	awk '
		function indent() { match($0, /^ */); return RLENGTH }
		inexpr && ($0 ~ /^[[:space:]]*$/ || indent() > ind) { print; next }
		inexpr { print "---"; inexpr = 0 }
		/^ *(- )?expr:/ {
			ind = indent()
			v = $0
			sub(/^ *(- )?expr: */, "", v)
			if (v ~ /^[|>][-+]?$/) {
				inexpr = 1
			} else {
				if (v ~ /^".*"$/ || v ~ /^\047.*\047$/)
					v = substr(v, 2, length(v) - 2)
				print v
				print "---"
			}
		}
		END { if (inexpr) print "---" }' "$1"
}

# The PromQL of a dashboard: the targets' expr and the variables' queries.
dashboard_exprs() {
	jq -r '(.. | objects | select(has("targets")) | .targets[]? | .expr | strings),
		(.templating.list[]? | .query | if type == "object" then .query else . end
			| strings)' "$1"
}

# The metric names in PromQL read on stdin, one a line: the names left
# once strings and comments (whichever starts first), Grafana's variables,
# label matchers, ranges, grouping clauses and numbers are gone, but for
# functions (a name before "(") and keywords.  Grafana's
# label_values(METRIC, LABEL) keeps METRIC only.
metric_names() {
	perl -0777 -ne '
		s/"(?:[^"\\]|\\.)*"|\x27(?:[^\x27\\]|\\.)*\x27|`[^`]*`|#[^\n]*//g;
		s/\$\{[^}]*\}|\$\w+//g;
		s/\blabel_values\s*\(\s*([^,()]*?)\s*,\s*\w+\s*\)/ $1 /g;
		s/\blabel_values\s*\(\s*\w+\s*\)//g;
		s/\{[^}]*\}//g;
		s/\[[^\]]*\]//g;
		s/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)//g;
		s/\b(?:offset)\s+-?[0-9a-z]+//g;
		s/(?<![\w:])[0-9][0-9.]*(?:[eE][+-]?[0-9]+)?//g;
		my %kw = map { $_ => 1 } qw(and or unless bool inf nan atan2
			group_left group_right by without on ignoring offset);
		while (/([A-Za-z_:][\w:]*)(\s*\()?/g) {
			next if defined $2 or $kw{lc $1};
			print "$1\n";
		}' | sort -u
}

# unknown NAMES ALLOWED: the names (one a line) not in ALLOWED, printed;
# fails if there is one.
unknown() {
	local bad
	bad=$(comm -23 <(echo "$1" | sort -u) <(echo "$2" | sort -u))
	[ -z "$bad" ] && return 0
	echo "$bad"
	return 1
}

# check_rules FILE: every metric the rules of FILE name is written by
# leaserun or recorded as the header shows; prints the others.
check_rules() {
	local exprs names
	exprs=$(rule_exprs "$1")
	[ "$(echo "$exprs" | grep -cx -- ---)" = "$(grep -cE '^ *- (alert|record):' "$1")" ] ||
		{ echo "not one expr: per rule found in $1"; return 1; }
	names=$(echo "$exprs" | grep -vx -- --- | metric_names)
	unknown "$names" "$(written; recorded "$1")"
}

# check_dashboard FILE: every metric the PromQL of FILE names is written
# by leaserun; prints the others.
check_dashboard() {
	local names
	names=$(dashboard_exprs "$1" | metric_names)
	[ -n "$names" ] || { echo "no metric found in $1"; return 1; }
	unknown "$names" "$(written)"
}

@test "the runs wrote every metric the man page lists" {
	local listed
	listed=$(sed -n 's/^\.It Va \(leaserun_[a-z_]*\)$/\1/p' "$LR_SRCDIR"/man/*.[1-9] | sort -u)
	[ "$(echo "$listed" | wc -l)" -ge 14 ] || fail "found only $listed in the man page"
	for n in $listed; do
		written | grep -qx "$n\(_bucket\)\{0,1\}" || fail "no $n in $M"
	done
}

@test "promtool loads the rules" {
	run promtool check rules "$RULES"
	assert_success
	assert_output --partial "SUCCESS"
}

@test "promtool test rules: each alert fires when it should, and only then" {
	run promtool test rules "$RULES_TEST"
	assert_success
	assert_output --partial "SUCCESS"
	# Every alert of the rules is tested, firing and quiet.
	for a in $(sed -n 's/^ *- alert: *//p' "$RULES"); do
		grep -q "alertname: $a\$" "$RULES_TEST" || fail "no test of $a"
		awk -v a="$a" '$0 ~ "alertname: " a "$" { n = NR }
			n && NR == n + 1 && /exp_alerts: \[\]/ { q = 1 }
			n && NR == n + 1 && /exp_alerts:$/ { f = 1 }
			END { exit !(q && f) }' "$RULES_TEST" ||
			fail "$a is not tested both firing and quiet"
	done
}

@test "the per-job thresholds the rules' header shows load, and are the ones the rules read" {
	recorded_example "$RULES" >"$BATS_TEST_TMPDIR/thresholds.yml"
	run promtool check rules "$BATS_TEST_TMPDIR/thresholds.yml"
	assert_success
	assert_equal "$(rule_exprs "$RULES" | grep -vx -- --- | metric_names | grep :)" \
		"$(recorded "$RULES")"
}

@test "every metric the rules name is one that leaserun writes" {
	run check_rules "$RULES"
	assert_success
	# And the series the rules' tests feed them.
	names=$(sed -n "s/^ *- series: *'\([^{']*\).*/\1/p" "$RULES_TEST" | sort -u)
	[ -n "$names" ]
	run unknown "$names" "$(written; recorded "$RULES")"
	assert_success
}

@test "the rules use no label but leaserun's and the scrape's" {
	labels=$({
		rule_exprs "$RULES" |
			grep -oE '\b(by|without|on|ignoring|group_left|group_right) *\([^)]*\)' |
			sed -E 's/^[a-z_]+ *\(//; s/\)$//; s/[, ]+/\n/g'
		grep -oE '\$labels\.[a-z_]+' "$RULES" | sed 's/^\$labels\.//'
	} | sed '/^$/d' | sort -u)
	run unknown "$labels" "$(printf '%s\n' name store le instance job)"
	assert_success
}

@test "the dashboard is JSON, with its data source as an input" {
	jq -e . "$DASHBOARD" >/dev/null
	jq -e '.__inputs | map(select(.name == "DS_PROMETHEUS" and .type == "datasource"
		and .pluginId == "prometheus")) | length == 1' "$DASHBOARD"
	# Every panel, query and variable uses it.
	run jq -r '[.. | objects | select(has("datasource")) | .datasource
		| select(. != {"type": "prometheus", "uid": "${DS_PROMETHEUS}"})] | length' "$DASHBOARD"
	assert_output 0
	run jq -r '[.panels[] | select(.type != "row") | .targets | length] | min' "$DASHBOARD"
	assert [ "$output" -ge 1 ]
}

@test "every metric the dashboard names is one that leaserun writes" {
	run check_dashboard "$DASHBOARD"
	assert_success
}

@test "promtool parses the dashboard's PromQL" {
	local f=$BATS_TEST_TMPDIR/dashboard.rules.yml i=0
	# Grafana's variables as Grafana would fill them in.
	{
		echo "groups:"
		echo "  - name: dashboard"
		echo "    rules:"
		jq -r '.. | objects | select(has("targets")) | .targets[]? | .expr | strings' "$DASHBOARD" |
			sed -e 's/\$__rate_interval\|\$__interval/5m/g' -e 's/\$ttl/10/g' \
				-e 's/\$name\|\$instance/.*/g' |
			while IFS= read -r e; do
				i=$((i + 1))
				echo "      - record: dashboard:expr$i"
				echo "        expr: $(jq -Rn --arg e "$e" '$e')"
			done
	} >"$f"
	run promtool check rules "$f"
	assert_success
}

@test "the name checks catch a metric that leaserun does not write" {
	local d=$BATS_TEST_TMPDIR
	sed 's/leaserun_lease_lost_total/leaserun_lease_lost_count/' "$RULES" >"$d/rules.yml"
	cmp -s "$RULES" "$d/rules.yml" && fail "the rename changed nothing"
	run check_rules "$d/rules.yml"
	assert_failure
	assert_output leaserun_lease_lost_count
	sed 's/leaserun_heartbeat_latency_seconds_bucket/leaserun_heartbeat_latency_bucket/' \
		"$DASHBOARD" >"$d/dashboard.json"
	cmp -s "$DASHBOARD" "$d/dashboard.json" && fail "the rename changed nothing"
	run check_dashboard "$d/dashboard.json"
	assert_failure
	assert_output leaserun_heartbeat_latency_bucket
	# A metric of another exporter, and a colon name no rule records.
	sed 's/increase(leaserun_run_failures_total\[1h\])/increase(node_textfile_scrape_error[1h])/' \
		"$RULES" >"$d/rules.yml"
	run check_rules "$d/rules.yml"
	assert_failure
	assert_output node_textfile_scrape_error
	sed 's/leaserun:lease_ttl_seconds/leaserun:ttl_seconds/g' "$RULES" |
		sed 's/^#   *- record: leaserun:ttl_seconds$/#         - record: leaserun:lease_ttl_seconds/' \
		>"$d/rules.yml"
	run check_rules "$d/rules.yml"
	assert_failure
	assert_output leaserun:ttl_seconds
}

@test "the Debian package ships the rules, their tests and the dashboard" {
	# As examples/prometheus/ and examples/grafana/: the tests find the
	# rules next to them.
	grep -qx contrib/prometheus "$LR_SRCDIR/debian/leaserun.examples"
	grep -qx contrib/grafana "$LR_SRCDIR/debian/leaserun.examples"
	grep -qx '  - leaserun.rules.yml' "$RULES_TEST"
}
