#!/usr/bin/env python3
"""Generate the built-in EC2 instance catalog, data/catalog/us-east-1.json.

Sources (all offline, all real AWS data except the spot prices):
  * Instance specs: EC2 DescribeInstanceTypes output as shipped by the `moto` PyPI package
    (moto/ec2/resources/instance_types.json.gz). The generated file records the moto version.
  * Zones offering each type in us-east-1: moto's DescribeInstanceTypeOfferings data,
    moto/ec2/resources/instance_type_offerings/availability-zone/us-east-1.json.gz.
  * On-demand Linux prices, us-east-1: ../shared/data/ec2-on-demand-prices.csv (AWS Pricing
    API export, columns region,instance_type,on_demand_usd_per_hour; its first line is a
    comment naming the publication date). Types without a price are dropped and counted.
  * Spot prices have no offline source. They are derived per (type, zone) by a deterministic
    rule (SPOT_RULE below): discount = 55% + 20% * u, where u in [0, 1) is the first 8 bytes
    of sha256("<type>|<zone>") read big-endian and divided by 2^64; spot = on-demand *
    (1 - discount), rounded to 6 decimals. Zones differ, reruns are byte-identical, and spot is
    always 55-75% below on-demand (typical of published spot discounts).

Selection: types whose first kube-mappable architecture is x86_64 (amd64) or arm64 (mac
types are excluded: they cannot join a Kubernetes cluster as regular nodes), that are offered
in at least one us-east-1 zone, and that are current generation per the data's
CurrentGeneration flag, or belong to a family of generation >= 5 (AWS's data flags c5, m5,
r5, m6i, r6i, r7g, c6gn, g5 as previous generation, yet Karpenter does not filter on that
flag and these are still its most common picks; generation < 5 families such as a1, c4, m4
stay out).

Label values follow aws/karpenter-provider-aws pkg/providers/instancetype/types.go
(computeRequirements): category and generation from the name scheme
`(^[a-z]+)(-[0-9]+tb)?([0-9]+).*\\.`, family and size from splitting on ".", cpu = default
vCPUs, memory = MiB, hypervisor as reported ("" for metal), local-nvme = total instance-store
GB when NVMe is supported, cpu-manufacturer and gpu-name/manufacturer lower-kebab-cased,
gpu-* only when the type has exactly one GPU entry, accelerator-* from a single neuron device
(manufacturer "aws") or a single inference accelerator. network-bandwidth: upstream reads a
table scraped from the EC2 docs' baseline bandwidth column; we use the sum of the network
cards' BaselineBandwidthInGbps * 1000 from the same DescribeInstanceTypes data, which is the
same figure. Label keys are stored without the "karpenter.k8s.aws/instance-" prefix.

Max pods: ENIs * (IPv4 per ENI - 1) + 2 with the default network card's ENI count, as upstream
ENILimitedPods (AL2023 and Bottlerocket default to ENI-limited pod density, reservedENIs 0).

Run (from the repository root; the date defaults to today, UTC):
    python3 -m venv /tmp/catvenv && /tmp/catvenv/bin/pip install moto
    /tmp/catvenv/bin/python scripts/gen_catalog.py [--date YYYY-MM-DD] [--prices CSV] [--out PATH]
"""

import argparse
import csv
import datetime
import gzip
import hashlib
import json
import os
import re
import sys

REGION = "us-east-1"
SPOT_RULE = (
    "spot = round(on_demand * (1 - (0.55 + 0.20 * u)), 6) where u = "
    "int.from_bytes(sha256('<type>|<zone>')[:8], 'big') / 2**64"
)
# aws/karpenter-provider-aws pkg/providers/instancetype/types.go instanceTypeScheme.
NAME_SCHEME = re.compile(r"(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.")
KUBE_ARCH = {"x86_64": "amd64", "arm64": "arm64"}


def kebab(s):
    return s.replace(" ", "-").lower()


def spot_price(on_demand, type_name, zone):
    digest = hashlib.sha256(f"{type_name}|{zone}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    return round(on_demand * (1 - (0.55 + 0.20 * u)), 6)


def load_prices(path):
    published = None
    prices = {}
    with open(path, newline="") as f:
        lines = []
        for line in f:
            if line.startswith("#"):
                m = re.search(r"on (\d{4}-\d{2}-\d{2})", line)
                if m:
                    published = m.group(1)
                continue
            lines.append(line)
    for row in csv.DictReader(lines):
        if row["region"] != REGION:
            continue
        price = float(row["on_demand_usd_per_hour"])
        if price > 0:
            prices[row["instance_type"]] = price
    return prices, published


def kube_arch(info):
    for a in info["ProcessorInfo"]["SupportedArchitectures"]:
        if a in KUBE_ARCH:
            return KUBE_ARCH[a]
    return None


def labels_for(name, info):
    labels = {}
    m = NAME_SCHEME.match(name)
    if m:
        labels["category"] = m.group(1)
        labels["generation"] = m.group(3)
    parts = name.split(".")
    if len(parts) == 2:
        labels["family"], labels["size"] = parts
    labels["capability-flex"] = "true" if "-flex" in parts[0] else "false"
    labels["cpu"] = str(info["VCpuInfo"]["DefaultVCpus"])
    labels["memory"] = str(info["MemoryInfo"]["SizeInMiB"])
    labels["hypervisor"] = info.get("Hypervisor", "")
    net = info["NetworkInfo"]
    labels["encryption-in-transit-supported"] = str(bool(net.get("EncryptionInTransitSupported"))).lower()
    storage = info.get("InstanceStorageInfo")
    if storage and storage.get("NvmeSupport") != "unsupported" and "TotalSizeInGB" in storage:
        labels["local-nvme"] = str(storage["TotalSizeInGB"])
    bandwidth = sum(c.get("BaselineBandwidthInGbps", 0) for c in net.get("NetworkCards", []))
    if bandwidth:
        labels["network-bandwidth"] = str(int(round(bandwidth * 1000)))
    gpus = (info.get("GpuInfo") or {}).get("Gpus", [])
    if len(gpus) == 1:
        g = gpus[0]
        labels["gpu-name"] = kebab(g["Name"])
        labels["gpu-manufacturer"] = kebab(g["Manufacturer"])
        labels["gpu-count"] = str(g["Count"])
        labels["gpu-memory"] = str(g["MemoryInfo"]["SizeInMiB"])
    neuron = info.get("NeuronInfo")
    accels = (info.get("InferenceAcceleratorInfo") or {}).get("Accelerators", [])
    if neuron and len(neuron.get("NeuronDevices", [])) == 1:
        d = neuron["NeuronDevices"][0]
        labels["accelerator-name"] = kebab(d["Name"])
        labels["accelerator-manufacturer"] = "aws"
        labels["accelerator-count"] = str(d["Count"])
    elif not neuron and len(accels) == 1:
        a = accels[0]
        labels["accelerator-name"] = kebab(a["Name"])
        labels["accelerator-manufacturer"] = kebab(a["Manufacturer"])
        labels["accelerator-count"] = str(a["Count"])
    proc = info["ProcessorInfo"]
    labels["cpu-manufacturer"] = kebab(proc.get("Manufacturer", ""))
    if "SustainedClockSpeedInGhz" in proc:
        labels["cpu-sustained-clock-speed-mhz"] = str(int(round(proc["SustainedClockSpeedInGhz"] * 1000)))
    ebs = info.get("EbsInfo") or {}
    if ebs.get("EbsOptimizedSupport") == "default" and "EbsOptimizedInfo" in ebs:
        labels["ebs-bandwidth"] = str(ebs["EbsOptimizedInfo"]["MaximumBandwidthInMbps"])
    return dict(sorted(labels.items()))


def entry_for(name, info, price, zones):
    net = info["NetworkInfo"]
    card = net["DefaultNetworkCardIndex"]
    enis = next(c["MaximumNetworkInterfaces"] for c in net["NetworkCards"] if c["NetworkCardIndex"] == card)
    ipv4 = net["Ipv4AddressesPerInterface"]
    capacity_types = sorted(c for c in info["SupportedUsageClasses"] if c in ("on-demand", "spot"))
    e = {
        "name": name,
        "vcpu": info["VCpuInfo"]["DefaultVCpus"],
        "memory_mib": info["MemoryInfo"]["SizeInMiB"],
        "arch": kube_arch(info),
        "architectures": info["ProcessorInfo"]["SupportedArchitectures"],
        "enis": enis,
        "ipv4_per_eni": ipv4,
        "max_pods": enis * (ipv4 - 1) + 2,
    }
    gpus = (info.get("GpuInfo") or {}).get("Gpus", [])
    if gpus:
        e["gpus"] = [
            {"name": g["Name"], "manufacturer": g["Manufacturer"], "count": g["Count"],
             "memory_mib": g["MemoryInfo"]["SizeInMiB"]}
            for g in gpus
        ]
    neuron = info.get("NeuronInfo")
    if neuron:
        devices = neuron["NeuronDevices"]
        e["neuron"] = {
            "name": devices[0]["Name"],
            "devices": sum(d["Count"] for d in devices),
            "cores": sum(d["Count"] * d["CoreInfo"]["Count"] for d in devices),
        }
    efa = (net.get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0)
    if efa:
        e["efa"] = efa
    if "local-nvme" in (labels := labels_for(name, info)):
        e["local_nvme_gib"] = int(labels["local-nvme"])
    e["hypervisor"] = info.get("Hypervisor", "")
    if "network-bandwidth" in labels:
        e["network_bandwidth_mbps"] = int(labels["network-bandwidth"])
    e["labels"] = labels
    e["capacity_types"] = capacity_types
    e["on_demand"] = price
    e["zones"] = zones
    if "spot" in capacity_types:
        e["spot"] = {z: spot_price(price, name, z) for z in zones}
    return e


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prices", default=os.path.join(root, "..", "shared", "data", "ec2-on-demand-prices.csv"))
    ap.add_argument("--out", default=os.path.join(root, "data", "catalog", f"{REGION}.json"))
    ap.add_argument("--date", default=datetime.datetime.now(datetime.timezone.utc).date().isoformat())
    args = ap.parse_args()

    import moto  # noqa: PLC0415 (imported late so --help works without it)

    res = os.path.join(os.path.dirname(moto.__file__), "ec2", "resources")
    with gzip.open(os.path.join(res, "instance_types.json.gz")) as f:
        infos = json.load(f)
    with gzip.open(os.path.join(res, "instance_type_offerings", "availability-zone", f"{REGION}.json.gz")) as f:
        offerings = json.load(f)
    zones_of = {}
    for o in offerings:
        zones_of.setdefault(o["InstanceType"], set()).add(o["Location"])
    prices, published = load_prices(args.prices)

    entries, dropped_price, skipped = [], [], 0
    for name in sorted(infos):
        info = infos[name]
        if kube_arch(info) is None or not zones_of.get(name):
            skipped += 1
            continue
        m = NAME_SCHEME.match(name)
        generation = int(m.group(3)) if m else 0
        if not (info.get("CurrentGeneration") or generation >= 5):
            skipped += 1
            continue
        if name not in prices:
            dropped_price.append(name)
            continue
        entries.append(entry_for(name, info, prices[name], sorted(zones_of[name])))

    header = {
        "region": REGION,
        "generated": args.date,
        "generator": "scripts/gen_catalog.py",
        "sources": {
            "instance_types": f"EC2 DescribeInstanceTypes data shipped by moto {moto.__version__} "
            "(moto/ec2/resources/instance_types.json.gz)",
            "zones": f"EC2 DescribeInstanceTypeOfferings (availability-zone, {REGION}) shipped by moto "
            f"{moto.__version__}",
            "on_demand_prices": f"AWS Pricing API, Linux on-demand, {REGION}, published {published} "
            "(shared/data/ec2-on-demand-prices.csv)",
            "spot_prices": "derived, no offline source: " + SPOT_RULE,
        },
        "label_prefix": "karpenter.k8s.aws/instance-",
        "max_pods": "enis * (ipv4_per_eni - 1) + 2 (upstream ENILimitedPods, default network card)",
        "count": len(entries),
        "dropped_without_price": len(dropped_price),
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write('{"header":' + json.dumps(header, separators=(",", ":")) + ',\n"instance_types":[\n')
        f.write(",\n".join(json.dumps(e, separators=(",", ":")) for e in entries))
        f.write("\n]}\n")
    arm = sum(1 for e in entries if e["arch"] == "arm64")
    print(f"wrote {len(entries)} instance types ({arm} arm64) to {args.out}")
    print(f"dropped {len(dropped_price)} without an on-demand price: {' '.join(dropped_price)}")
    print(f"skipped {skipped} (not x86_64/arm64, not offered in {REGION}, or previous generation < 5)")


if __name__ == "__main__":
    sys.exit(main())
