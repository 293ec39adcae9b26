#!/usr/bin/env python3
"""Writes the hand-built fixture hosts under testdata/hosts (all but vm2,
which is a copy of the 2-CPU build VM's real files).

Each host is described by its CPUs (package, core_id, apic id, online), its
caches and its NUMA nodes; this script lays them out the way Linux's sysfs
does (drivers/base/topology.c, drivers/base/cacheinfo.c, drivers/base/node.c):

  sys/devices/system/cpu/{online,present,possible,offline}
  sys/devices/system/cpu/cpuN/online                     (not for cpu0)
  sys/devices/system/cpu/cpuN/topology/{physical_package_id,core_id,
      thread_siblings_list,core_cpus_list,core_siblings_list,package_cpus_list}
  sys/devices/system/cpu/cpuN/cache/indexI/{level,type,size,
      coherency_line_size,ways_of_associativity,shared_cpu_list,id}
  sys/devices/system/node/{online,possible}, node/nodeN/cpulist
  proc/cpuinfo (online CPUs only, as the kernel prints it)

As on a real kernel, an offline CPU keeps only cpuN/online: its topology
and cache directories are removed, and it is left out of every online
CPU's sibling and shared_cpu lists and of its node's cpulist.

Run from this directory: python3 mkfixtures.py
"""
import os
import shutil


def cpulist(cpus):
    cpus = sorted(cpus)
    out, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else "%d-%d" % (cpus[i], cpus[j]))
        i = j + 1
    return ",".join(out)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def build(name, host):
    root = name
    shutil.rmtree(root, ignore_errors=True)
    cpus = host["cpus"]  # id -> dict(package, core, apic, online)
    online = [c for c in sorted(cpus) if cpus[c]["online"]]
    present = sorted(cpus)
    sysc = os.path.join(root, "sys/devices/system/cpu")
    write(os.path.join(sysc, "online"), cpulist(online))
    write(os.path.join(sysc, "present"), cpulist(present))
    write(os.path.join(sysc, "possible"), cpulist(present))
    write(os.path.join(sysc, "offline"), cpulist([c for c in present if c not in online]))
    write(os.path.join(sysc, "kernel_max"), "8191")
    for c in present:
        d = os.path.join(sysc, "cpu%d" % c)
        if c != 0:  # cpu0 cannot be offlined on x86 and has no online file
            write(os.path.join(d, "online"), "1" if cpus[c]["online"] else "0")
        if not cpus[c]["online"]:
            continue
        p, core = cpus[c]["package"], cpus[c]["core"]
        smt = [o for o in online if cpus[o]["package"] == p and cpus[o]["core"] == core]
        pkg = [o for o in online if cpus[o]["package"] == p]
        t = os.path.join(d, "topology")
        write(os.path.join(t, "physical_package_id"), str(p))
        write(os.path.join(t, "die_id"), "0")
        write(os.path.join(t, "core_id"), str(core))
        write(os.path.join(t, "thread_siblings_list"), cpulist(smt))
        write(os.path.join(t, "core_cpus_list"), cpulist(smt))
        write(os.path.join(t, "core_siblings_list"), cpulist(pkg))
        write(os.path.join(t, "package_cpus_list"), cpulist(pkg))
        for i, cache in enumerate(host["caches"]):
            level, ctype, size, ways, share, idfn = cache
            shared = [o for o in online if share(cpus[o]) == share(cpus[c])]
            x = os.path.join(d, "cache", "index%d" % i)
            write(os.path.join(x, "level"), str(level))
            write(os.path.join(x, "type"), ctype)
            write(os.path.join(x, "size"), size)
            write(os.path.join(x, "coherency_line_size"), "64")
            write(os.path.join(x, "ways_of_associativity"), str(ways))
            write(os.path.join(x, "shared_cpu_list"), cpulist(shared))
            write(os.path.join(x, "id"), str(idfn(cpus[c])))
    sysn = os.path.join(root, "sys/devices/system/node")
    nodes = host["nodes"]  # node id -> list of CPUs (online or not)
    write(os.path.join(sysn, "online"), cpulist(nodes))
    write(os.path.join(sysn, "possible"), cpulist(nodes))
    write(os.path.join(sysn, "has_cpu"), cpulist([n for n in nodes if any(c in online for c in nodes[n])]))
    for n, ncpus in nodes.items():
        write(os.path.join(sysn, "node%d" % n, "cpulist"), cpulist([c for c in ncpus if c in online]))
    info = []
    for c in online:
        x = cpus[c]
        siblings = len([o for o in online if cpus[o]["package"] == x["package"]])
        cores = len({cpus[o]["core"] for o in online if cpus[o]["package"] == x["package"]})
        info.append("\n".join([
            "processor\t: %d" % c,
            "vendor_id\t: %s" % host["vendor"],
            "cpu family\t: %d" % host["family"],
            "model\t\t: %d" % host["model"],
            "model name\t: %s" % host["model_name"],
            "stepping\t: %d" % host["stepping"],
            "cpu MHz\t\t: %s" % host["mhz"],
            "cache size\t: %s" % host["cache_size"],
            "physical id\t: %d" % x["package"],
            "siblings\t: %d" % siblings,
            "core id\t\t: %d" % x["core"],
            "cpu cores\t: %d" % cores,
            "apicid\t\t: %d" % x["apic"],
            "initial apicid\t: %d" % x["apic"],
            "fpu\t\t: yes",
            "flags\t\t: %s" % host["flags"],
            "clflush size\t: 64",
            "cache_alignment\t: 64",
            "address sizes\t: %s" % host["address_sizes"],
            "power management:",
        ]) + "\n")
    write(os.path.join(root, "proc/cpuinfo"), "\n".join(info).rstrip("\n") + "\n")
    for k, v in host["kernel"].items():
        write(os.path.join(root, "proc/sys/kernel", k), v)
    for pmu, typ in host["pmus"].items():
        write(os.path.join(root, "sys/bus/event_source/devices", pmu, "type"), str(typ))


def intel2s():
    """2-socket Xeon Gold 6248-like (Cascade Lake-SP, family 6 model 85),
    scaled to 4 cores per socket, SMT on, one NUMA node per socket. Linux
    numbers the first thread of every core first (socket 0, then socket 1),
    then the SMT siblings in the same order; Intel core ids have gaps."""
    core_ids = [0, 1, 8, 9]
    cpus = {}
    for thread in range(2):
        for pkg in range(2):
            for k, core in enumerate(core_ids):
                cid = thread * 8 + pkg * 4 + k
                apic = pkg * 64 + core * 2 + thread
                cpus[cid] = dict(package=pkg, core=core, apic=apic, online=True)
    percore = lambda x: (x["package"], x["core"])
    caches = [
        (1, "Data", "32K", 8, percore, lambda x: x["apic"] >> 1),
        (1, "Instruction", "32K", 8, percore, lambda x: x["apic"] >> 1),
        (2, "Unified", "1024K", 16, percore, lambda x: x["apic"] >> 1),
        (3, "Unified", "28160K", 11, lambda x: x["package"], lambda x: x["package"]),
    ]
    nodes = {p: [c for c in cpus if cpus[c]["package"] == p] for p in range(2)}
    return dict(cpus=cpus, caches=caches, nodes=nodes, vendor="GenuineIntel", family=6, model=85,
                stepping=7, model_name="Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", mhz="2500.000",
                cache_size="28160 KB", address_sizes="46 bits physical, 48 bits virtual",
                flags="fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid dca sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch cpuid_fault epb cat_l3 cdp_l3 invpcid_single intel_ppin ssbd mba ibrs ibpb stibp ibrs_enhanced tpr_shadow vnmi flexpriority ept vpid ept_ad fsgsbase tsc_adjust bmi1 hle avx2 smep bmi2 erms invpcid rtm cqm mpx rdt_a avx512f avx512dq rdseed adx smap clflushopt clwb intel_pt avx512cd avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local dtherm ida arat pln pts pku ospke avx512_vnni md_clear flush_l1d arch_capabilities",
                kernel={"osrelease": "5.15.0-105-generic", "hostname": "xeon2s", "perf_event_paranoid": "2"},
                pmus={"cpu": 4, "breakpoint": 5, "msr": 9, "power": 10, "software": 1, "tracepoint": 2, "uprobe": 7, "kprobe": 6, "intel_pt": 8, "uncore_imc_0": 13})


def epyc_nps4():
    """2-socket AMD EPYC 72F3 (Zen 3 Milan, family 25 model 1): 8 CCDs per
    socket with one core each, SMT on, so 8 L3 domains per socket. NPS4
    splits each socket into 4 NUMA nodes of two CCDs. Linux numbers first
    threads (socket 0, socket 1) then SMT siblings. APIC ids leave room for
    8 cores per CCD (ccd*16 + core*2 + thread, socket 1 from 128); the
    kernel derives core_id and the cache ids from them (L1/L2: apic>>1, L3:
    apic>>4, unique across sockets)."""
    cpus = {}
    for thread in range(2):
        for pkg in range(2):
            for ccd in range(8):
                cid = thread * 16 + pkg * 8 + ccd
                apic = pkg * 128 + ccd * 16 + thread
                cpus[cid] = dict(package=pkg, core=ccd * 8, apic=apic, online=True, ccd=ccd)
    percore = lambda x: (x["package"], x["core"])
    caches = [
        (1, "Data", "32K", 8, percore, lambda x: x["apic"] >> 1),
        (1, "Instruction", "32K", 8, percore, lambda x: x["apic"] >> 1),
        (2, "Unified", "512K", 8, percore, lambda x: x["apic"] >> 1),
        (3, "Unified", "32768K", 16, lambda x: (x["package"], x["ccd"]), lambda x: x["apic"] >> 4),
    ]
    nodes = {}
    for pkg in range(2):
        for q in range(4):
            nodes[pkg * 4 + q] = [c for c in cpus if cpus[c]["package"] == pkg and cpus[c]["ccd"] // 2 == q]
    return dict(cpus=cpus, caches=caches, nodes=nodes, vendor="AuthenticAMD", family=25, model=1,
                stepping=1, model_name="AMD EPYC 72F3 8-Core Processor", mhz="3700.000",
                cache_size="512 KB", address_sizes="48 bits physical, 48 bits virtual",
                flags="fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid aperfmperf rapl pni pclmulqdq monitor ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw ibs skinit wdt tce topoext perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 invpcid_single hw_pstate ssbd mba ibrs ibpb stibp vmmcall fsgsbase bmi1 avx2 smep bmi2 invpcid cqm rdt_a rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local clzero irperf xsaveerptr rdpru wbnoinvd amd_ppin arat npt lbrv svm_lock nrip_save tsc_scale vmcb_clean flushbyasid decodeassists pausefilter pfthreshold v_vmsave_vmload vgif v_spec_ctrl umip pku ospke vaes vpclmulqdq rdpid overflow_recov succor smca",
                kernel={"osrelease": "6.8.0-45-generic", "hostname": "epyc-nps4", "perf_event_paranoid": "4"},
                pmus={"cpu": 4, "amd_df": 10, "amd_l3": 11, "amd_iommu_0": 12, "ibs_fetch": 8, "ibs_op": 9, "breakpoint": 5, "msr": 13, "power": 14, "software": 1, "tracepoint": 2, "uprobe": 7, "kprobe": 6})


def offline():
    """Single-socket Skylake desktop (Core i7-6700, family 6 model 94), 4
    cores with SMT, where an admin took CPUs 5 and 7 offline
    (echo 0 > /sys/devices/system/cpu/cpu5/online): cores 1 and 3 run one
    thread each. No cache ids are lost; the offline CPUs vanish from every
    list."""
    cpus = {}
    for thread in range(2):
        for core in range(4):
            cid = thread * 4 + core
            cpus[cid] = dict(package=0, core=core, apic=core * 2 + thread, online=cid not in (5, 7))
    percore = lambda x: x["core"]
    caches = [
        (1, "Data", "32K", 8, percore, lambda x: x["core"]),
        (1, "Instruction", "32K", 8, percore, lambda x: x["core"]),
        (2, "Unified", "256K", 4, percore, lambda x: x["core"]),
        (3, "Unified", "8192K", 16, lambda x: 0, lambda x: 0),
    ]
    nodes = {0: list(cpus)}
    return dict(cpus=cpus, caches=caches, nodes=nodes, vendor="GenuineIntel", family=6, model=94,
                stepping=3, model_name="Intel(R) Core(TM) i7-6700 CPU @ 3.40GHz", mhz="3400.000",
                cache_size="8192 KB", address_sizes="39 bits physical, 48 bits virtual",
                flags="fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch cpuid_fault epb invpcid_single pti ssbd ibrs ibpb stibp tpr_shadow vnmi flexpriority ept vpid ept_ad fsgsbase tsc_adjust bmi1 hle avx2 smep bmi2 erms invpcid rtm mpx rdseed adx smap clflushopt intel_pt xsaveopt xsavec xgetbv1 xsaves dtherm ida arat pln pts hwp hwp_notify hwp_act_window hwp_epp md_clear flush_l1d arch_capabilities",
                kernel={"osrelease": "6.1.0-21-amd64", "hostname": "desk-offline", "perf_event_paranoid": "3"},
                pmus={"cpu": 4, "breakpoint": 5, "cstate_core": 8, "cstate_pkg": 9, "intel_pt": 10, "msr": 11, "power": 12, "software": 1, "tracepoint": 2, "uprobe": 7, "kprobe": 6})


if __name__ == "__main__":
    build("intel2s", intel2s())
    build("epyc-nps4", epyc_nps4())
    build("offline", offline())
