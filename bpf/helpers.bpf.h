// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
// Helpers cacheheat.c and funclat.c share, one copy each (as libbpf-tools
// keep theirs in maps.bpf.h and bits.bpf.h).
#ifndef CACHEHEAT_HELPERS_BPF_H
#define CACHEHEAT_HELPERS_BPF_H

// errno names from the kernel's UAPI headers: vmlinux.h has no macros.
#include <asm-generic/errno-base.h>

// log2_bucket is v's bucket in a log2 histogram of last+1 buckets:
// floor(log2(v)), 0 for v < 2, at most last. Branch-free, so it costs the
// same few instructions at any value (a loop would cost up to 40 rounds
// on the scheduler's hot path).
static __always_inline u32 log2_bucket(u64 v, u32 last)
{
	u32 r, shift;

	shift = (v > 0xFFFFFFFF) << 5; v >>= shift; r = shift;
	shift = (v > 0xFFFF) << 4; v >>= shift; r |= shift;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r > last ? last : r;
}

// lookup_or_try_init returns key's value in map, inserting *init first
// when there is none. NULL when the map refuses (full: -E2BIG, or out of
// memory), with *err the kernel's error; an insert another CPU won is
// not an error.
static __always_inline void *lookup_or_try_init(void *map, const void *key, const void *init, long *err)
{
	void *v = bpf_map_lookup_elem(map, key);

	*err = 0;
	if (v)
		return v;
	*err = bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	if (*err && *err != -EEXIST)
		return NULL;
	*err = 0;
	return bpf_map_lookup_elem(map, key);
}

// in_cgroup_subtree says whether task t's cgroup v2 is the one with
// kernfs id id at depth level, or one of its descendants: its ancestor
// at that level is that cgroup.
static __always_inline bool in_cgroup_subtree(struct task_struct *t, u64 id, u32 level)
{
	struct cgroup *cg = BPF_CORE_READ(t, cgroups, dfl_cgrp);
	struct cgroup *anc = NULL;

	if (!cg || BPF_CORE_READ(cg, level) < (int)level)
		return false;
	if (bpf_probe_read_kernel(&anc, sizeof(anc), &cg->ancestors[level]) || !anc)
		return false;
	return BPF_CORE_READ(anc, kn, id) == id;
}

#endif
