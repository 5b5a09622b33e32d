# bench/rounds.awk - the ratios of a run measured in rounds, shared by the
# bench scripts.  Each file is one round: hyperfine's CSV (command, mean,
# stddev, median, user, system, min, max, in seconds; no command's name
# may hold a comma), one row per command in the order they were given.
# A ratio is taken within a round, between blocks well under a second
# apart, and the median of the rounds' ratios is reported: one hyperfine
# of a few hundred runs a command compares blocks measured seconds or
# minutes apart, and the machine's drift between them moved a ratio by
# 0.1x to 0.3x from one run of a script to the next.
#
# The caller adds its END block (awk -F, -f rounds.awk -f PROGRAM), which
# prints with ratio(x, y) (its range in lo and hi) and ms(x), x and y the
# commands' rows, from 1.

FNR == 1 { r++; next }
{ med[r, FNR - 1] = $4 }

function sort(a, n,   i, j, t) {
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
		}
}

# The median over the rounds of med[., x] / med[., y].
function ratio(x, y,   i, a) {
	for (i = 1; i <= r; i++)
		a[i] = med[i, x] / med[i, y]
	sort(a, r)
	lo = a[1]; hi = a[r]
	return r % 2 ? a[(r + 1) / 2] : (a[r / 2] + a[r / 2 + 1]) / 2
}

# The median over the rounds of command x's median, in ms.
function ms(x,   i, a) {
	for (i = 1; i <= r; i++)
		a[i] = med[i, x]
	sort(a, r)
	return 1000 * (r % 2 ? a[(r + 1) / 2] : (a[r / 2] + a[r / 2 + 1]) / 2)
}
