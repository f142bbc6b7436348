/* A code context's share of its sandbox (src/serve/context_share.h): the arithmetic. What the
 * limits do to a real memory bomb and fork bomb is tests/integration/serve_interp.sh's. */
#include "serve/context_share.h"
#include "tap.h"

#define MIB SHARE_MIB

int main(void)
{
    is_u64(share_memory_limit(0, 100 * MIB, 10 * MIB), 0, "a sandbox without a limit: none");
    is_u64(share_memory_limit(512 * MIB, 100 * MIB, 10 * MIB), (512 - 90 - 64) * MIB,
           "512 MiB, the others hold 90: the context may have 512 - 90 - 64 (an eighth kept)");
    is_u64(share_memory_limit(512 * MIB, 10 * MIB, 10 * MIB), (512 - 64) * MIB,
           "alone in the sandbox: all but the reserve");
    is_u64(share_memory_limit(128 * MIB, 0, 0), (128 - 32) * MIB, "the reserve is 32 MiB at least");
    is_u64(share_memory_limit(8192 * MIB, 0, 0), (8192 - 128) * MIB, "and 128 MiB at most");
    is_u64(share_memory_limit(512 * MIB, 500 * MIB, 100 * MIB), 116 * MIB,
           "the others leave less than it holds: what it holds plus 16 MiB");
    is_u64(share_memory_limit(64 * MIB, 64 * MIB, 60 * MIB), 64 * MIB,
           "never more than the sandbox's limit");
    is_u64(share_memory_limit(512 * MIB, 10 * MIB, 300 * MIB), (512 - 64) * MIB,
           "a context read as more than the whole (two reads, not atomic): no wrap");
    is_u64(share_memory_limit(512 * MIB, 100 * MIB + 12345, 10 * MIB) % MIB, 0, "whole MiB");
    uint64_t top = UINT64_MAX & ~(MIB - 1);
    is_u64(share_memory_limit(UINT64_MAX, UINT64_MAX, 0), 16 * MIB,
           "others at 2^64: what the context holds plus 16 MiB, no wrap");
    is_u64(share_memory_limit(UINT64_MAX, 0, UINT64_MAX - 1), top,
           "a context near 2^64: the sandbox's limit (in whole MiB), no wrap");
    is_u64(share_memory_limit(UINT64_MAX, 0, 0), top - 128 * MIB, "nothing used: all but 128 MiB");
    is_u64(share_memory_limit(1 * MIB, 0, 0), 1 * MIB, "a tiny sandbox: never a limit of 0");

    is_u64(share_pids_limit(0), 0, "no pids limit: none");
    is_u64(share_pids_limit(4096), 4096 - 512, "4096 pids: an eighth kept for the others");
    is_u64(share_pids_limit(64), 64 - 16, "16 kept at least");
    is_u64(share_pids_limit(10), 1, "a tiny limit: 1, never 0 (no limit)");
    return done_testing();
}
