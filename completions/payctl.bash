# bash completion for payctl. Installed by `make install` into
# share/bash-completion/completions/payctl; to try it from a checkout: source completions/payctl.bash
#
# Commands and options are read from payctl's own help (`payctl --help`, `payctl GROUP VERB
# --help`), so the completion always matches the binary it completes.

_payctl_help_words() {
    # $1: the section ("commands:" or "options:"); the rest: payctl arguments before --help.
    local section=$1
    shift
    "${_payctl_bin:-payctl}" "$@" --help 2>/dev/null | awk -v section="$section" '
        /^[a-z ]+:$/ {
            in_section = ($0 == section || (section ~ /options:$/ && $0 == "global options:"))
            next
        }
        in_section && /^  [^ ]/ { print $1, $2 }'
}

_payctl() {
    local cur=${COMP_WORDS[COMP_CWORD]}
    local _payctl_bin=${COMP_WORDS[0]}
    local -a words=()
    local i
    # The bare words typed so far (group, verb), skipping options and their values.
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        -*) ;;
        *) case ${COMP_WORDS[i - 1]} in
               --verbose | --pretty | --all | --help | -v | -h | payctl | */payctl) words+=("${COMP_WORDS[i]}") ;;
               --*) ;;
               *) words+=("${COMP_WORDS[i]}") ;;
           esac ;;
        esac
    done

    if [[ $cur == -* ]]; then
        local opts
        if ((${#words[@]} >= 2)); then
            opts=$(_payctl_help_words "options:" "${words[0]}" "${words[1]}" | awk '{print $1}')
        else
            opts=$(_payctl_help_words "global options:" | awk '{print $1}')
        fi
        mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
        return
    fi
    case ${#words[@]} in
    0)
        local groups
        groups=$(_payctl_help_words "commands:" | awk '{print $1}' | sort -u)
        mapfile -t COMPREPLY < <(compgen -W "$groups" -- "$cur")
        ;;
    1)
        if [[ ${words[0]} == request ]]; then
            mapfile -t COMPREPLY < <(compgen -W "GET HEAD POST PUT PATCH DELETE" -- "$cur")
            return
        fi
        local verbs
        verbs=$(_payctl_help_words "commands:" | awk -v g="${words[0]}" '$1 == g {print $2}')
        mapfile -t COMPREPLY < <(compgen -W "$verbs" -- "$cur")
        ;;
    esac
}
complete -F _payctl payctl
