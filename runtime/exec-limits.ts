/**
 * What `exec` takes on Linux: one argument or one `NAME=value` string of at most MAX_ARG_STRLEN
 * (32 pages, 128 KiB, its NUL included), and no NUL byte inside either. Declared here, on the worker
 * side that starts processes; the spec rules (controller/spec/rules.ts) refuse larger values with the
 * file and line, and the standby adv exec spawns what would not fit (exec-standby.ts).
 */
export const MAX_ARG_BYTES = 128 * 1024 - 1;
