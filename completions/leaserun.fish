# fish completion for leaserun(1)

# The options, for argparse: it stops at the lease name.
function __fish_leaserun_rest
    set -l tokens (commandline -opc) (commandline -ct)
    set -e tokens[1]
    argparse -s n/nonblock nb w/wait= timeout= E/conflict-exit-code= \
        c/command= U/url= url-file= t/ttl= renew= signal= warn-signal= \
        k/kill-after= once-per= max-time= splay= foreground \
        l/limit= s/shared x/exclusive v/verbose q/quiet log-format= syslog \
        metrics-file= status break slot= list check json \
        V/version h/help -- $tokens 2>/dev/null
    or return 1
    string join0 -- $argv
end

# True while the word being completed is an option or the lease name.
function __fish_leaserun_before_name
    set -l rest (__fish_leaserun_rest | string split0)
    or return 0
    test (count $rest) -le 1
end

# True where a lease name may come: not after --check, which takes none.
function __fish_leaserun_wants_name
    __fish_leaserun_before_name
    and not contains -- --check (commandline -opc)
end

# True once the lease name is given (not for --status / --break / --check).
function __fish_leaserun_after_name
    set -l rest (__fish_leaserun_rest | string split0)
    or return 1
    test (count $rest) -ge 2
    and not contains -- --status (commandline -opc)
    and not contains -- --break (commandline -opc)
    and not contains -- --list (commandline -opc)
    and not contains -- --check (commandline -opc)
end

# Lease names already used in the file store's directory: DIR of a
# file:///DIR URL in LEASERUN_URL, else the default.
function __fish_leaserun_names
    set -l dir
    switch "$LEASERUN_URL"
        case 'file:///?*'
            set dir (string replace -r '^file://' '' -- $LEASERUN_URL)
        case '' 'file://' 'file:///'
            if test (id -u) -eq 0
                set dir /run/leaserun
            else if string match -q '/*' -- "$XDG_RUNTIME_DIR"
                set dir $XDG_RUNTIME_DIR/leaserun
            else if test -d /run/user/(id -u) -a -O /run/user/(id -u)
                set dir /run/user/(id -u)/leaserun
            else if string match -q '/*' -- "$XDG_STATE_HOME"
                set dir $XDG_STATE_HOME/leaserun
            else
                set dir $HOME/.local/state/leaserun
            end
        case '*'
            return
    end
    for f in $dir/*.lock
        string replace -r '\.lock$' '' -- (basename $f)
    end
end

# After NAME: an optional --, then the command, or -c STRING.
function __fish_leaserun_command
    set -l rest (__fish_leaserun_rest | string split0)
    set -e rest[1]
    if contains -- $rest[1] -c --command
        test (count $rest) -eq 2
        and __fish_complete_command
        return
    end
    if test "$rest[1]" = --
        set -e rest[1]
    else if test (count $rest) -eq 1
        and string match -q -- '-*' $rest[1]
        string split ' ' -- '-- -c --command'
        return
    end
    __fish_complete_subcommand --commandline $rest
end

set -l signals HUP INT QUIT ILL TRAP ABRT BUS FPE KILL USR1 SEGV USR2 PIPE \
    ALRM TERM CONT TSTP TTIN TTOU URG XCPU XFSZ VTALRM PROF WINCH IO PWR SYS

complete -c leaserun -f
complete -c leaserun -n __fish_leaserun_wants_name -a '(__fish_leaserun_names)' -d 'lease name'
complete -c leaserun -n __fish_leaserun_after_name -a '(__fish_leaserun_command)'

complete -c leaserun -n __fish_leaserun_before_name -s n -l nonblock -d 'fail (exit 1) rather than wait'
complete -c leaserun -n __fish_leaserun_before_name -s w -l wait -x -d 'wait at most DURATION for the lease'
complete -c leaserun -n __fish_leaserun_before_name -l nb -d 'fail (exit 1) rather than wait, as in flock'
complete -c leaserun -n __fish_leaserun_before_name -l timeout -x -d 'wait at most DURATION, as in flock'
complete -c leaserun -n __fish_leaserun_before_name -s E -l conflict-exit-code -x -a '(seq 0 255)' -d 'exit code when not acquired'
complete -c leaserun -n __fish_leaserun_before_name -s c -l command -x -a '(__fish_complete_command)' -d 'run STRING with /bin/sh -c'
complete -c leaserun -n __fish_leaserun_before_name -s U -l url -x -a 'file:///' -d 'the store URL'
complete -c leaserun -n __fish_leaserun_before_name -l url-file -r -F -d 'read the store URL from PATH'
complete -c leaserun -n __fish_leaserun_before_name -s t -l ttl -x -d 'lease time to live (default 10s)'
complete -c leaserun -n __fish_leaserun_before_name -l renew -x -d 'renew interval (default TTL/3)'
complete -c leaserun -n __fish_leaserun_before_name -l signal -x -a "$signals" -d 'signal to stop the command when the lease is at risk'
complete -c leaserun -n __fish_leaserun_before_name -l warn-signal -x -a "$signals" -d 'signal the command as soon as a renewal fails'
complete -c leaserun -n __fish_leaserun_before_name -s k -l kill-after -x -d 'send --signal this long before the lease deadline'
complete -c leaserun -n __fish_leaserun_before_name -l once-per -x -d "start the command at most once per DURATION, by the store's clock"
complete -c leaserun -n __fish_leaserun_before_name -l max-time -x -d 'stop the command after DURATION'
complete -c leaserun -n __fish_leaserun_before_name -l splay -x -d 'wait a random time below DURATION before the first attempt'
complete -c leaserun -n __fish_leaserun_before_name -l foreground -d 'keep the command in our process group'
complete -c leaserun -n __fish_leaserun_before_name -s l -l limit -x -d 'let up to N hold NAME at once, each in a slot'
complete -c leaserun -n __fish_leaserun_before_name -s s -l shared -d 'hold NAME with other shared holders'
complete -c leaserun -n __fish_leaserun_before_name -s x -l exclusive -d 'hold NAME alone (the default)'
complete -c leaserun -n __fish_leaserun_before_name -s v -l verbose -d 'log each lifecycle step (twice: more)'
complete -c leaserun -n __fish_leaserun_before_name -s q -l quiet -d 'log only failures of leaserun itself'
complete -c leaserun -n __fish_leaserun_before_name -l log-format -x -a 'text json' -d 'log line format'
complete -c leaserun -n __fish_leaserun_before_name -l syslog -d 'log to syslog instead of stderr'
complete -c leaserun -n __fish_leaserun_before_name -l metrics-file -r -F -d 'keep Prometheus counters in PATH'
complete -c leaserun -n __fish_leaserun_before_name -l status -d 'show who holds NAME'
complete -c leaserun -n __fish_leaserun_before_name -l break -d "remove the current holders' leases"
complete -c leaserun -n __fish_leaserun_before_name -l slot -x -d 'with --break: only the holder of slot K'
complete -c leaserun -n __fish_leaserun_before_name -l list -d 'list the held leases whose names match PATTERN'
complete -c leaserun -n __fish_leaserun_before_name -l check -d 'from the command: is our lease still held?'
complete -c leaserun -n __fish_leaserun_before_name -l json -d '--status, --list and --check print JSON'
complete -c leaserun -n __fish_leaserun_before_name -s V -l version -d 'show the version and stores'
complete -c leaserun -n __fish_leaserun_before_name -s h -l help -d 'show the help'
