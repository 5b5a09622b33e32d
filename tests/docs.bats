#!/usr/bin/env bats
# The interface is written down four times: --help, the man page, and the
# bash, zsh and fish completions.  These tests fail when one of them
# drifts, when the man pages stop matching the code (log events, store
# URL options) or the build and the packages that install them, and when
# the README's quick start stops naming real commands.

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load coverage

setup() {
	: "${LEASERUN:?LEASERUN must name the leaserun binary (make check sets it)}"
	: "${LR_SRCDIR:?LR_SRCDIR must name the source directory (make check sets it)}"
	MAN="$LR_SRCDIR/man/leaserun.1"
	MON="$LR_SRCDIR/man/leaserun-monitoring.7"
	BASH_COMP="$LR_SRCDIR/completions/leaserun"
	ZSH_COMP="$LR_SRCDIR/completions/_leaserun"
	FISH_COMP="$LR_SRCDIR/completions/leaserun.fish"
	# A caller's settings must not change what the quick start does:
	# every LEASERUN_ variable goes, whatever its name, but the module
	# directory that make check gives.
	# shellcheck disable=SC2046 # names: nothing to split or glob
	unset $(compgen -v LEASERUN_ | grep -vx LEASERUN_MODULE_DIR) NOTIFY_SOCKET
}

# --- extraction: one option per line, e.g. "--wait" or "-w" -------------

# Option lines of --help: " -w, --wait DURATION" or "     --renew ...".
help_options() {
	"$LEASERUN" --help |
		sed -nE 's/^ +(-[A-Za-z], +)?(--[a-z][a-z-]*).*/\1 \2/p' |
		tr -d ',' | tr ' ' '\n' | sed '/^$/d'
}

# The ".It Fl" entries of the man page's OPTIONS section:
# ".It Fl w , Fl -wait Ar duration".
man_options() {
	awk '/^\.Sh /{ in_opts = ($0 == ".Sh OPTIONS") } in_opts' "$MAN" |
		grep -E '^\.It Fl ' |
		grep -oE '(^\.It | )Fl -?[A-Za-z][A-Za-z-]*' |
		sed -E 's/^(\.It )? ?Fl /-/'
}

# The OPTS="..." list of the bash completion.
bash_options() {
	sed -n '/OPTS="/,/"$/p' "$BASH_COMP" |
		sed -E 's/.*OPTS="//; s/"$//' | tr -s ' \t' '\n' | sed '/^$/d'
}

# The option specs of the zsh completion's _arguments call:
# "'(excl)'{-w+,--wait=}'[...]..." and "'(excl)--url-file=[...]...".
zsh_options() {
	sed -n '/^_arguments/,$p' "$ZSH_COMP" | sed 1d |
		sed -E "s/^[[:space:]]+//; s/^'//; s/^\([^)]*\)//; s/^\*//; s/^'//" |
		sed -nE 's/^\{([^}]*)\}.*/\1/p; t; s/^(--?[A-Za-z][A-Za-z-]*).*/\1/p' |
		tr ',' '\n' | sed -E 's/[+=]$//'
}

# The -s and -l of every "complete -c leaserun" line of the fish completion.
fish_options() {
	grep -E '^complete -c leaserun ' "$FISH_COMP" |
		grep -oE -- ' -[sl] [A-Za-z][A-Za-z-]*' |
		sed -E 's/^ -s /-/; s/^ -l /--/'
}

# The flock(1) spellings the man page accepts besides an option's own
# (".Fl -nb" then "is accepted as well"): the completions offer them too.
man_aliases() {
	awk 'prev ~ /^\.Fl -[a-z-]+$/ && /^is accepted as well/ {
		split(prev, a, " "); print "-" a[2] } { prev = $0 }' "$MAN"
}

longs() { grep -E '^--' | sort -u; }
shorts() { grep -E '^-[A-Za-z]$' | sort -u; }

# same_set WHAT NAME LIST [aliases]: LIST (one per line) is exactly the
# --help set, and with "aliases" the man page's flock spellings too.
same_set() {
	local what=$1 name=$2 list=$3 want
	if [ "$what" = long ] && [ "${4:-}" = aliases ]; then
		want=$({ help_options; man_aliases; } | longs)
	elif [ "$what" = long ]; then
		want=$(help_options | longs)
	else
		want=$(help_options | shorts)
	fi
	run diff -u --label "--help" --label "$name" <(echo "$want") \
		<(echo "$list")
	if [ "$status" -ne 0 ]; then
		echo "the $what options of $name differ from --help:"
		echo "$output"
		return 1
	fi
}

# --- tests -----------------------------------------------------------------

# Every page of the manual: leaserun.1 and the leaserun-*.7 pages.
man_pages() {
	ls "$LR_SRCDIR"/man/leaserun.1 "$LR_SRCDIR"/man/leaserun-*.7
}

@test "every man page is clean under mandoc -Tlint" {
	local f n=0
	command -v mandoc >/dev/null || fail "mandoc is not installed (apt-get install mandoc)"
	for f in $(man_pages); do
		run mandoc -Tlint -W warning "$f"
		[ "$status" -eq 0 ] && [ -z "$output" ] ||
			fail "$(basename "$f") is not clean under mandoc -Tlint -W warning: $output"
		n=$((n + 1))
	done
	# leaserun(1), leaserun-monitoring(7) and one page per store.
	[ "$n" -ge 7 ] || fail "found only $n man pages"
}

@test "leaserun(1) renders to at most 1,250 lines" {
	# Issue 28: the stores and monitoring have pages of their own, so
	# that leaserun(1) stays a page one can read through.
	local n
	command -v mandoc >/dev/null || fail "mandoc is not installed (apt-get install mandoc)"
	n=$(mandoc -T utf8 "$MAN" | wc -l)
	[ "$n" -le 1250 ] || fail "leaserun(1) renders to $n lines, more than 1,250"
}

@test "leaserun(1)'s SEE ALSO names every leaserun-*(7) page, and only those" {
	local f page pages see missing='' extra=''
	see=$(awk '/^\.Sh /{ in_see = ($0 == ".Sh SEE ALSO") } in_see' "$MAN" |
		sed -nE 's/^\.Xr (leaserun-[a-z]+) 7.*/\1/p' | sort)
	pages=$(for f in "$LR_SRCDIR"/man/leaserun-*.7; do basename "$f" .7; done | sort)
	[ -n "$pages" ] || fail "no leaserun-*.7 page in man/"
	for page in $pages; do
		grep -qx "$page" <<<"$see" || missing="$missing $page(7)"
	done
	for page in $see; do
		grep -qx "$page" <<<"$pages" || extra="$extra $page(7)"
	done
	[ -z "$missing" ] || fail "not in leaserun(1)'s SEE ALSO:$missing"
	[ -z "$extra" ] || fail "leaserun(1)'s SEE ALSO names pages that do not exist:$extra"
}

# The words of the man_MANS and dist_man_MANS lines of Makefile.am and of
# the files it includes (a store's local.mk), one a line, as paths from
# the top of the source tree.
installed_pages() {
	local mk dir
	for mk in Makefile.am $(sed -nE 's/^include +(\$\((top_)?srcdir\)\/)?//p' \
		"$LR_SRCDIR/Makefile.am"); do
		dir=$(dirname "$mk")
		# Join continued lines; %reldir% (%D%) is the fragment's folder.
		sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$LR_SRCDIR/$mk" |
			sed -nE 's/^(dist_|nodist_)?man_MANS[[:space:]]*\+?=//p' |
			sed -E "s#%(reldir|D)%#$dir#g"
	done | tr -s ' \t' '\n' | sed '/^$/d'
}

@test "every man page is installed by Makefile.am" {
	local f missing=
	for f in $(man_pages); do
		installed_pages | grep -qx "man/$(basename "$f")" ||
			missing="$missing man/$(basename "$f")"
	done
	[ -z "$missing" ] || fail "not in a man_MANS line of Makefile.am:$missing"
	# And every page it installs exists.
	for f in $(installed_pages); do
		[ -f "$LR_SRCDIR/$f" ] || fail "Makefile.am installs $f, which does not exist"
	done
}

@test "--help lists the options the tests compare" {
	# Guards the extraction: an empty list would match an empty list.
	run bash -c "$(declare -f help_options); help_options"
	assert_success
	assert_line -- "--nonblock"
	assert_line -- "-n"
	assert_line -- "--url-file"
	assert_line -- "--help"
	[ "$(help_options | longs | wc -l)" -ge 15 ] ||
		fail "found only $(help_options | longs | wc -l) long options in --help"
	[ "$(help_options | shorts | wc -l)" -ge 10 ] ||
		fail "found only $(help_options | shorts | wc -l) short options in --help"
}

@test "the man page's OPTIONS list exactly the long options of --help" {
	same_set long "man/leaserun.1" "$(man_options | longs)"
}

@test "the man page's OPTIONS list exactly the short options of --help" {
	same_set short "man/leaserun.1" "$(man_options | shorts)"
}

@test "the bash completion offers exactly the long options of --help, and --nb and --timeout as flock does" {
	same_set long "completions/leaserun" "$(bash_options | longs)" aliases
}

@test "the bash completion offers exactly the short options of --help" {
	same_set short "completions/leaserun" "$(bash_options | shorts)"
}

@test "the zsh completion offers exactly the long options of --help, and --nb and --timeout as flock does" {
	same_set long "completions/_leaserun" "$(zsh_options | longs)" aliases
}

@test "the zsh completion offers exactly the short options of --help" {
	same_set short "completions/_leaserun" "$(zsh_options | shorts)"
}

@test "the fish completion offers exactly the long options of --help, and --nb and --timeout as flock does" {
	same_set long "completions/leaserun.fish" "$(fish_options | longs)" aliases
}

@test "the fish completion offers exactly the short options of --help" {
	same_set short "completions/leaserun.fish" "$(fish_options | shorts)"
}

@test "the completion files are valid shell" {
	run bash -n "$BASH_COMP"
	assert_success
	if command -v zsh >/dev/null; then
		run zsh -n "$ZSH_COMP"
		assert_success
	fi
	if command -v fish >/dev/null; then
		run fish -n "$FISH_COMP"
		assert_success
	fi
}

@test "every LEASERUN_ variable named in --help is in the man page's ENVIRONMENT" {
	local vars env v missing=
	vars=$("$LEASERUN" --help | grep -oE 'LEASERUN_[A-Z_]+' | sort -u)
	[ -n "$vars" ] || fail "--help names no LEASERUN_ variable"
	env=$(awk '/^\.Sh /{ in_env = ($0 == ".Sh ENVIRONMENT") } in_env' "$MAN" |
		sed -nE 's/^\.It Ev (LEASERUN_[A-Z_]+).*/\1/p')
	for v in $vars; do
		grep -qx "$v" <<<"$env" || missing="$missing $v"
	done
	[ -z "$missing" ] || fail "not in the man page's ENVIRONMENT:$missing"
}

# The first two fenced code blocks of the README, one line each.
quick_start() {
	awk '/^```/ { if (inb) { inb = 0; n++; if (n == 2) exit } else inb = 1; next }
	     inb { print n + 0 "\t" $0 }' "$LR_SRCDIR/README"
}

@test "the README's quick start is two one-line commands under its heading" {
	run awk '/^```/ { print NR ": " $0; n++; if (n == 4) exit }
		/^## Quick start/ { print NR ": heading" }' "$LR_SRCDIR/README"
	assert_line --index 0 --regexp '^[0-9]+: heading$'
	assert_line --index 1 --regexp '^[0-9]+: ```sh$'
	assert_line --index 3 --regexp '^[0-9]+: ```sh$'
	run quick_start
	assert_success
	assert_equal "${#lines[@]}" 2
	assert_line --index 0 --regexp $'^0\t.*'
	assert_line --index 1 --regexp $'^1\t.*make( -j2)? check$'
}

@test "the README's quick-start commands exist" {
	local line step word n=0
	while IFS=$'\t' read -r _ line; do
		# Each step of "a && b && c": its command word must exist.
		while read -r step; do
			word=${step%% *}
			case $word in
			./leaserun) ;; # run for real below
			./configure) [ -f "$LR_SRCDIR/configure.ac" ] ||
				fail "quick start runs ./configure, but there is no configure.ac" ;;
			*/*) [ -x "$LR_SRCDIR/$word" ] ||
				fail "quick start runs $word, which is not an executable file in the source tree" ;;
			*) command -v "$word" >/dev/null ||
				fail "quick start runs $word, which is not installed" ;;
			esac
			n=$((n + 1))
		done <<<"${line// && /$'\n'}"
	done < <(quick_start)
	[ "$n" -ge 5 ] || fail "found only $n steps in the quick start"
}

@test "the README's first quick-start command runs a job under a lease" {
	local line cmd
	line=$(quick_start | sed -n '1s/^[^\t]*\t//p')
	cmd=${line##*&& }
	[[ $cmd == ./leaserun\ * ]] || fail "the first quick-start command does not end by running ./leaserun: $cmd"
	mkdir "$BATS_TEST_TMPDIR/locks"
	export LEASERUN_URL="file://$BATS_TEST_TMPDIR/locks"
	run bash -c "${cmd/#.\/leaserun/\"\$LEASERUN\"}"
	assert_success
	assert_line --regexp "^running with fence [1-9][0-9]*$"
	assert_line --regexp "acquired, fence [1-9][0-9]*$"
}

# "MODULE PACKAGE" for each store --version lists as not installed (all of
# them, with no module directory).
store_packages() {
	LEASERUN_MODULE_DIR=/nonexistent "$LEASERUN" --version |
		sed -nE 's/^  ([a-z]+) +not installed \(package ([a-z0-9.+-]+),.*/\1 \2/p'
}

@test "each store's package in the scheme table is built by debian/ and installs that module" {
	local m p n=0
	while read -r m p; do
		grep -qx "Package: $p" "$LR_SRCDIR/debian/control" ||
			fail "--version names the package $p, which debian/control does not build"
		grep -qE "^usr/lib/[^ ]*/leaserun/$m\.so$" "$LR_SRCDIR/debian/$p.install" ||
			fail "debian/$p.install does not install $m.so"
		n=$((n + 1))
	done < <(store_packages)
	[ "$n" -ge 4 ] || fail "--version named only $n packages"
	# A module that a store loads for some schemes (etcds://:
	# etcd-tls.so) comes in the store's package.
	while read -r m h; do
		p=$(store_packages | sed -n "s/^$m //p")
		grep -qE "^usr/lib/[^ ]*/leaserun/$h\.so$" "$LR_SRCDIR/debian/$p.install" ||
			fail "debian/$p.install does not install $h.so, which the $m store loads"
	done < <("$LEASERUN" --version |
		sed -nE 's/^  ([a-z]+) +available \([a-z+]+:\/\/[^ ]* with ([a-z-]+)\.so: .*/\1 \2/p')
	# And no module package that the table does not know.
	for p in $(sed -n 's/^Package: \(leaserun-.*\)/\1/p' "$LR_SRCDIR/debian/control"); do
		store_packages | grep -q " $p\$" ||
			fail "debian/control builds $p, which no store of --version names"
	done
}

@test "each man page comes in one Debian package: a store's page in the store's" {
	local f base sec n pkgs m p
	for f in $(man_pages); do
		base=$(basename "$f")
		sec=${base##*.}
		pkgs=$(grep -lx "usr/share/man/man$sec/$base" "$LR_SRCDIR"/debian/*.install |
			xargs -r -n 1 basename | sed 's/\.install$//')
		n=$(grep -c . <<<"$pkgs" || true)
		[ "$n" -eq 1 ] ||
			fail "man/$base is installed by $n packages of debian/, not one: ${pkgs//$'\n'/ }"
	done
	# The store pages are named after the store's package.
	n=0
	while read -r m p; do
		[ -f "$LR_SRCDIR/man/$p.7" ] ||
			fail "the $m store (package $p) has no page man/$p.7"
		grep -qx "usr/share/man/man7/$p.7" "$LR_SRCDIR/debian/$p.install" ||
			fail "debian/$p.install does not install $p.7"
		n=$((n + 1))
	done < <(store_packages)
	[ "$n" -ge 4 ] || fail "--version named only $n packages"
	# The command's own pages come with the command.
	for f in man1/leaserun.1 man7/leaserun-file.7 man7/leaserun-monitoring.7; do
		grep -qx "usr/share/man/$f" "$LR_SRCDIR/debian/leaserun.install" ||
			fail "debian/leaserun.install does not install $f"
	done
}

@test "every leaserun-*(7) that the documents name is a page in man/" {
	local page missing='' n=0
	for page in $({
		grep -ohE 'leaserun-[a-z]+\(7\)' "$LR_SRCDIR/README" \
			"$LR_SRCDIR/tests/README" "$LR_SRCDIR"/bench/README* \
			"$LR_SRCDIR"/completions/* "$LR_SRCDIR/debian/control" |
			sed 's/(7)$//'
		# shellcheck disable=SC2046 # paths in the source tree: no blanks
		grep -ohE '^\.Xr leaserun-[a-z]+ 7' $(man_pages) |
			sed -E 's/^\.Xr ([^ ]+) 7/\1/'
	} | sort -u); do
		[ -f "$LR_SRCDIR/man/$page.7" ] || missing="$missing $page(7)"
		n=$((n + 1))
	done
	[ -z "$missing" ] || fail "named, but not a page in man/:$missing"
	[ "$n" -ge 6 ] || fail "found only $n pages named"
}

# The events the code logs: the second argument of every lr_log() and
# lr_logf() call, wherever under src/ it is.
code_events() {
	find "$LR_SRCDIR/src" -name '*.c' -exec perl -0ne \
		'print "$1\n" while /\blr_logf?\(\s*LR_LOG_[A-Z]+,\s*"([^"]*)"/g' {} + |
		sort -u
}

# The "Log lines" subsection of leaserun-monitoring(7).
log_lines() {
	awk '/^\.S[sh] /{ on = ($0 == ".Ss Log lines") } on' "$MON"
}

@test "leaserun-monitoring(7) documents exactly the log events of the code" {
	local code page e missing='' extra=''
	code=$(code_events)
	[ "$(grep -c . <<<"$code")" -ge 25 ] ||
		fail "found only $(grep -c . <<<"$code") events in the code"
	# Each is an item of the list of events, or named in the paragraph of
	# the events without fields.
	page=$({
		log_lines | sed -nE 's/^\.It Cm ([a-z-]+)$/\1/p'
		log_lines | sed -n '/^Other events carry no fields/,/^\.Pp/p' |
			sed -nE 's/^\.Cm ([a-z-]+).*/\1/p'
	} | sort -u)
	for e in $code; do
		grep -qx -- "$e" <<<"$page" || missing="$missing $e"
	done
	for e in $page; do
		grep -qx -- "$e" <<<"$code" || extra="$extra $e"
	done
	[ -z "$missing" ] || fail "logged, but not under \"Log lines\" in leaserun-monitoring(7):$missing"
	[ -z "$extra" ] || fail "leaserun-monitoring(7) documents events the code does not log:$extra"
}

# The URL options of store $1 (its module's name): the keys of the
# option tables in the folder of the source file that says .name = "$1"
# (a store's URL may be parsed in a file of its own: src/redis/), and
# those of url.h's TLS group (LR_URL_TLS_OPTS) when a table takes it.
code_url_options() {
	local src files
	src=$(grep -rlE "^[[:space:]]*\.name = \"$1\"," "$LR_SRCDIR/src" --include='*.c')
	[ -n "$src" ] || return 1
	files=("$(dirname "$src")"/*.c)
	grep -q 'LR_URL_TLS_OPTS' "${files[@]}" &&
		files+=("$LR_SRCDIR/src/store/url.h")
	perl -0ne 'print "$1\n" while /\{\s*"([a-z_]+)",\s*LR_OPT_[A-Z]+\b/g' \
		"${files[@]}" | sort -u
}

# The options that the "URL options" list of page $1 names:
# ".It Cm cacert Ns = Ns Ar FILE , Cm cert Ns = Ns Ar FILE , ...".
page_url_options() {
	awk '/^\.S[sh] /{ on = ($0 == ".Ss URL options") } on' "$1" |
		grep -E '^\.It ' | grep -oE 'Cm [a-z_]+ Ns =' |
		sed -E 's/^Cm ([a-z_]+) Ns =$/\1/' | sort -u
}

@test "each store's page lists exactly the URL options of its code" {
	local m p code page n=0
	while read -r m p; do
		code=$(code_url_options "$m") ||
			fail "no source file under src/ says .name = \"$m\""
		page=$(page_url_options "$LR_SRCDIR/man/$p.7")
		run diff -u --label "src ($m)" --label "man/$p.7" \
			<(echo "$code") <(echo "$page")
		[ "$status" -eq 0 ] ||
			fail "the URL options of $p(7) differ from the code's: $output"
		[ -z "$code" ] || n=$((n + 1))
	done < <(store_packages)
	# Redis, etcd and ZooKeeper have options; PostgreSQL's are libpq's.
	[ "$n" -ge 3 ] || fail "found URL options for only $n stores"
}

@test "the README's systemd units are the examples the package ships" {
	local f n=0
	for f in "$LR_SRCDIR"/debian/examples/*.service "$LR_SRCDIR"/debian/examples/*.timer; do
		run awk -v first="$(head -n 1 "$f")" '
			/^```/ { if (inb && take) exit; inb = !inb; top = 1; next }
			inb && top { top = 0; take = ($0 == first) }
			inb && take { print }' "$LR_SRCDIR/README"
		assert_success
		[ -n "$output" ] || fail "the README has no block that starts like $f"
		diff -u --label "$f" --label README "$f" <(echo "$output") ||
			fail "the README's copy of $(basename "$f") differs"
		n=$((n + 1))
	done
	[ "$n" -ge 2 ] || fail "found only $n units in debian/examples"
}

@test "the README stays short and its pointers name files that exist" {
	# Issue 28: the man page says each fact once; the README is an
	# overview that points to it, to tests/README and to bench/README.
	local n f refs missing=
	n=$(wc -l <"$LR_SRCDIR/README")
	[ "$n" -le 500 ] || fail "the README has $n lines, more than 500"
	# Every "tests/README", "bench/README.md", [text](path) ... it names.
	refs=$({
		grep -oE '(tests|bench)/README[A-Za-z0-9._-]*' "$LR_SRCDIR/README"
		grep -oE '\]\([^)#]+\)' "$LR_SRCDIR/README" |
			sed -E 's/^\]\(//; s/\)$//' | grep -vE '^[a-z]+:'
	} | sed -E 's/[.]$//' | sort -u)
	grep -qx 'tests/README' <<<"$refs" || fail "the README does not point to tests/README"
	grep -qx 'bench/README' <<<"$refs" || fail "the README does not point to bench/README"
	for f in $refs; do
		[ -e "$LR_SRCDIR/$f" ] || missing="$missing $f"
	done
	[ -z "$missing" ] || fail "the README points to files that do not exist:$missing"
}

@test "the license is MIT: LICENSE, debian/copyright (Expat) and the README say the same" {
	grep -qx "MIT License" "$LR_SRCDIR/LICENSE"
	grep -qx "Copyright (c) 2026 the leaserun authors" "$LR_SRCDIR/LICENSE"
	run awk '/^Files: \*$/ { f = 1; next } f && /^License:/ { print $2; exit }' \
		"$LR_SRCDIR/debian/copyright"
	assert_output "Expat"
	grep -q "^License: Expat$" "$LR_SRCDIR/debian/copyright"
	run grep -c "MIT license" "$LR_SRCDIR/README"
	assert_output 1
	# The project's Makefile ships it in the tarball.
	grep -q "^EXTRA_DIST += README LICENSE" "$LR_SRCDIR/Makefile.am"
}
