"""An EC2 + SSM + IAM + SQS (+ Pricing) peer for the AWS provider's tests: moto 5.2.5 plus a
small adapter (moto has no Pricing API; item 14 stands in for it).

Usage: python moto_server.py PORT   (0 = any free port; prints "listening on PORT")

moto (https://pypi.org/project/moto/, `moto[server,ec2,ssm,iam,sqs]==5.2.5`) emulates the AWS
APIs in memory. Its werkzeug app is served here on 127.0.0.1 behind a WSGI layer that adds
the test controls (under /_peer/); a few of its EC2 handlers are replaced on
`moto.ec2.responses.EC2Response`. The account is moto's default, 123456789012; any
credentials are accepted (the tests use AWS_ACCESS_KEY_ID=AWS_SECRET_ACCESS_KEY=testing).
Each request's service and region come from the SigV4 credential scope
(`.../us-east-1/ec2/aws4_request`); its action from the `Action` form field (EC2, IAM) or
the `X-Amz-Target` header (SSM, `AmazonSSM.GetParameter`; SQS, `AmazonSQS.ReceiveMessage`).

Gaps named in the plan, and how each is filled:
 1. The EKS-optimized AMIs and their SSM parameters are absent (moto's /aws/service tree
    has only Amazon Linux and ECS images, and PutParameter refuses /aws/ names). In
    us-east-1 at start, and in any other region on its first EC2 or SSM request (or
    control naming it), four Kubernetes 1.33 AL2023 images of release v20241115 are
    registered straight into moto's EC2 backend: OwnerId 602401143452, ImageOwnerAlias
    "amazon", public, State available, CreationDate 2024-11-15T00:00:00.000Z, hvm/ebs,
    root /dev/xvda:
        amazon-eks-node-al2023-x86_64-standard-1.33-v20241115  ami-70f878bdab4487796
        amazon-eks-node-al2023-arm64-standard-1.33-v20241115   ami-1593005047fe15fa3
        amazon-eks-node-al2023-x86_64-nvidia-1.33-v20241115    ami-af9fa7ce5951e33c8
        amazon-eks-node-al2023-x86_64-neuron-1.33-v20241115    ami-403f5e1f74aa8ccd2
    Ids are deterministic: "ami-" and the first 17 hex digits of sha256(NAME), the same in
    every region and run (a name registered again in a region takes sha256("NAME#2"),
    ...). For each (arch, variant) the SSM parameters upstream Karpenter's AL2023 alias
    resolution reads are written straight into moto's SSM store (String, DataType text),
    with the image id as value:
        /aws/service/eks/optimized-ami/1.33/amazon-linux-2023/ARCH/VARIANT/recommended/image_id
        /aws/service/eks/optimized-ami/1.33/amazon-linux-2023/ARCH/VARIANT/NAME/image_id
    (ARCH/VARIANT: x86_64/standard, arm64/standard, x86_64/nvidia, x86_64/neuron). The
    normal GetParameter(s) answer them; a name not seeded is ParameterNotFound.
 2. CreateFleet (moto's) launches the cheapest launch spec, by SpotPrice, which is the
    first override when none has a price, and never reports per-override errors. For
    Type=instant it is replaced (maintain/request fleets keep moto's): every
    LaunchTemplateConfig's Overrides (none = one empty override) are walked in the
    order given, sorted by Priority ascending (stable; unprioritised last) when any has
    one. An override's instance type is its InstanceType (else the template's), its
    zone its AvailabilityZone (else the subnet's), its subnet its SubnetId (else the
    zone's default subnet). The capacity type is spot when
    TargetCapacitySpecification.DefaultTargetCapacityType is spot (or, without it,
    when SpotTargetCapacity > 0), else on-demand. An override whose (instance type,
    zone) is in the injected ICE set (a pair with capacity_type null matches both
    capacity types) is skipped and reported in errorSet: launchTemplateAndOverrides
    (launchTemplateSpecification {launchTemplateId, version (a number: $Latest and
    $Default resolved)}, overrides {instanceType, subnetId, availabilityZone, imageId
    and priority when sent}), lifecycle (spot / on-demand), errorCode
    InsufficientInstanceCapacity and errorMessage "We currently do not have sufficient
    TYPE capacity in the Availability Zone you requested (ZONE). ...". The first other
    override launches TotalTargetCapacity instances (overrides after it are not
    tried, not reported) through moto's RunInstances with the template version's data:
    ImageId (the override's ImageId wins), SecurityGroupIds, UserData, MetadataOptions,
    IamInstanceProfile (associated as RunInstances does), BlockDeviceMappings, KeyName,
    the template's instance tags, in that subnet and zone. The instances carry the
    fleet's TagSpecifications of ResourceType instance, and aws:ec2:fleet-id,
    aws:ec2launchtemplate:id and aws:ec2launchtemplate:version as on EC2; volume tag
    specifications tag their volumes; spot instances show InstanceLifecycle spot in
    DescribeInstances (on-demand ones have none). A template naming an instance
    profile that does not exist puts, as EC2 does, an InvalidParameterValue ("Value
    (NAME) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance
    Profile name") in errorSet for that override, and the next one is tried. The answer
    is CreateFleet's XML: fleetId, errorSet, fleetInstanceSet (items:
    launchTemplateAndOverrides, lifecycle, instanceIds, instanceType, availabilityZone,
    subnetId); when every
    override is ICE it has no instances and lists every error, with HTTP 200. The fleet
    is registered with moto too (DescribeFleets, DescribeFleetInstances and
    DeleteFleets know it), and each request is recorded for GET /_peer/fleets (12).
    Templates targeting capacity reservations launch into them (15), templates with a
    Placement group into it (18), templates with NetworkInterfaces get them (19); both
    are checked before injected ICE, each failure a CreateFleetError of its override.
 3. DescribeSpotPriceHistory answers a placeholder (every offering at 0.00001, dated
    2006, description "Linux/UNIX (Amazon VPC)"), and its product-description filter
    matches nothing. It is replaced: one record per instance type and zone of
    ../../data/catalog/us-east-1.json's `spot` maps (SpotPrice the catalog's price with
    6 decimals, Timestamp now, whole seconds); other regions have none. Narrowed by
    InstanceTypes, AvailabilityZone, and the filters instance-type, availability-zone
    and product-description (exact values). ProductDescription is "Linux/UNIX"; when
    ProductDescriptions or the product-description filter name "Linux/UNIX (Amazon
    VPC)", records with that description are answered too (both when both are named).
    StartTime/EndTime are ignored. Sorted by instance type then zone; MaxResults (default
    and cap 1000) and NextToken (an offset) page it; the last page has no NextToken.

Found beyond those (moto 5.2.5), and how each is handled:
 4. DescribeInstanceTypes ignores MaxResults and NextToken (all 1395 types in one
    answer). It pages now: MaxResults 5-100 (default 100, outside the range
    InvalidParameterValue), NextToken an offset, none on the last page. The
    filters are moto's (the processor-info.*, vcpu-info.*, memory-info.*, ...,
    supported-* attribute paths, with * and ? wildcards; an unknown filter is
    InvalidParameterValue).
 5. DescribeInstanceTypeOfferings ignores MaxResults/NextToken, treats filter values
    literally (instance-type m5.* matched nothing) and silently matches nothing for an
    unknown filter. Replaced: filters location and instance-type with * and ?
    wildcards, any other filter InvalidParameterValue ("The filter 'NAME' is invalid");
    MaxResults 5-1000 (default 1000), NextToken an offset. LocationType region (the
    default), availability-zone or availability-zone-id, from moto's data.
 6. TerminateInstances of an instance already terminated answered CurrentState
    shutting-down; EC2 answers terminated (48), with PreviousState terminated. The first
    termination answers shutting-down (32), and DescribeInstances shows it terminated at
    once (moto keeps terminated instances listed, as EC2 does for about an hour). An
    unknown id is InvalidInstanceID.NotFound for the whole request (moto's, as EC2).
 7. CreateLaunchTemplate copies the request's launch-template TagSpecifications into the
    template data, so DescribeLaunchTemplateVersions showed a ResourceType
    launch-template entry in LaunchTemplateData.TagSpecifications (EC2 keeps them on the
    template only). The data now holds the TagSpecifications as sent in
    LaunchTemplateData, and no UserData key when none was sent. Everything else in
    LaunchTemplateData (MetadataOptions, UserData base64, BlockDeviceMappings,
    SecurityGroupIds, ImageId, IamInstanceProfile) comes back as sent, and so do
    (checked, moto keeps them) NetworkInterfaces with DeviceIndex, NetworkCardIndex,
    Groups, InterfaceType, Ipv4PrefixCount and ConnectionTrackingSpecification
    {TcpEstablishedTimeout, UdpStreamTimeout, UdpTimeout},
    CpuOptions.NestedVirtualization and Placement {GroupId, GroupName, PartitionNumber},
    from CreateLaunchTemplateVersion too.
 8. CreateTags on an instance id that does not exist succeeded; now it is
    InvalidInstanceID.NotFound ("The instance ID 'ID' does not exist"), as EC2.
 9. DeleteLaunchTemplate of an unknown name answered MissingParameter, of an unknown id
    InvalidLaunchTemplateName.NotFoundException; now, as EC2,
    InvalidLaunchTemplateName.NotFoundException ("The specified launch template, with
    template name NAME, does not exist.") and InvalidLaunchTemplateId.NotFound ("...,
    with template ID ID, does not exist.").
Checked and left as moto has them: DescribeSubnets and DescribeSecurityGroups filter
`tag:KEY` (wildcards in values too), `tag-key`, vpc-id, group-name, availability-zone;
DescribeImages takes ImageIds (an unknown one is InvalidAMIID.NotFound), Owners (ids,
"self", "amazon" = the alias), and filters name, tag:KEY, architecture, state with
wildcards; DescribeLaunchTemplates takes LaunchTemplateNames (an unknown name is
InvalidLaunchTemplateName.NotFoundException) and tag filters; DescribeInstances filters
tag:KEY, tag-key, instance-state-name, instance-id and pages by reservation (MaxResults
default 100); instances carry LaunchTime, ImageId, SubnetId, SecurityGroups,
InstanceType, Placement.AvailabilityZone, PrivateIpAddress and PrivateDnsName
`ip-10-0-1-4.ec2.internal` (ip-A-B-C-D.ec2.internal in us-east-1,
ip-A-B-C-D.REGION.compute.internal elsewhere; the first address of a subnet is its .4),
IamInstanceProfile {Arn, Id}, MetadataOptions, BlockDeviceMappings, Tags; the default
VPC has a default subnet per zone (us-east-1a..f, 172.31.0.0/16). IAM CreateRole,
CreateInstanceProfile (Path, Tags), GetInstanceProfile (Roles, Tags; unknown:
NoSuchEntity, HTTP 404), AddRoleToInstanceProfile (a second role: LimitExceeded),
TagInstanceProfile, RemoveRoleFromInstanceProfile, DeleteInstanceProfile work as in IAM.

Test controls, plain HTTP on the same port, JSON in and out (errors: {"error": "..."}
with 400, unknown controls 404). Control requests are neither logged nor throttled. A
body may name "region" (default us-east-1) for ssm, ami, capacity-reservations (a GET
too) and placement-groups/state.
10. ICE. `POST /_peer/ice` {"pairs": [{"instance_type": "m5.large", "zone":
    "us-east-1a", "capacity_type": "on-demand" | "spot" | null, "placement_group":
    "pg-..." | null (default), "partition": 1-7 | null (default; only with a group)}]}
    replaces the set and answers it as {"pairs": [...]} (every key present); `GET
    /_peer/ice` answers it; `DELETE /_peer/ice` empties it. CreateFleet (2) reads it: a
    pair without placement_group fails every launch of its type, zone and capacity type,
    in a placement group or not; one with placement_group only launches into that group
    (and, with partition, into that partition: a partition EC2 assigns (18) is then
    chosen among the others, and when none is left the launch fails).
11. Throttling. `POST /_peer/throttle` {"action": "DescribeInstanceTypes", "count": 2}
    sets how many of the next calls of that action (of any service) are refused
    without reaching moto: EC2 with HTTP 503 and <Response><Errors><Error><Code>
    RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error>
    </Errors><RequestID>UUID</RequestID></Response>; SSM with HTTP 400
    {"__type": "ThrottlingException", "message": "Rate exceeded"}
    (application/x-amz-json-1.1); IAM with HTTP 400 <ErrorResponse><Error><Type>Sender
    </Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error>...; SQS
    with HTTP 400 {"__type": "com.amazonaws.sqs#RequestThrottled", "message": "Rate
    exceeded"} (application/x-amz-json-1.0, x-amzn-query-error RequestThrottled;Sender).
    Answers {"throttles": {ACTION: LEFT, ...}}, as do `GET /_peer/throttle` and
    `DELETE /_peer/throttle` (which forgets them all).
12. Request log. Every AWS request is recorded as {"service": "ec2" | "ssm" | "iam" | "sqs",
    "action": "CreateFleet", "throttled": false}, the last 5000 kept. `GET
    /_peer/requests` answers the list, oldest first; `DELETE /_peer/requests` empties it
    and answers {"cleared": N}. `GET /_peer/fleets` answers every instant CreateFleet
    so far, oldest first: {"fleet_id", "type", "capacity_type" ("spot", "on-demand", or
    "reserved" (15)), "total_target_capacity", "spot_allocation_strategy"
    (SpotOptions.AllocationStrategy or null), "on_demand_allocation_strategy"
    (OnDemandOptions.AllocationStrategy or null), "overrides": [{"launch_template_id",
    "version", "instance_type", "subnet_id", "availability_zone", "image_id",
    "priority", "capacity_reservation_id"}, ...] in the order sent (before any Priority
    sort), "errors": [{"instance_type", "availability_zone", "error_code"}],
    "instance_ids": [...], "tags": {RESOURCE_TYPE: {KEY: VALUE}}}; `DELETE
    /_peer/fleets` empties it.
13. New AMI releases. `POST /_peer/ssm` {"name": "/aws/service/...", "value": "ami-..."}
    sets or overwrites any parameter (a new version, String) and answers {"name",
    "value", "version"}. `POST /_peer/ami` {"name": "...", "architecture": "x86_64"
    (default), "creation_date": "2024-12-01T00:00:00.000Z" (default now), "tags":
    {KEY: VALUE} (optional), "owner": "602401143452" (default; that owner gets the alias
    "amazon" and is public)} registers an available image with the deterministic id of
    (1) and answers {"image_id": "ami-..."}.
14. The Pricing API, which moto lacks. `AWSPriceListService.GetProducts` (JSON 1.1, SigV4
    service "pricing") is answered here for ServiceCode AmazonEC2: one price-list item per
    instance type of the region's table, as a JSON string: {"product": {"productFamily",
    "attributes": {"instanceType", "regionCode", "tenancy", "operatingSystem",
    "preInstalledSw", "capacitystatus", "marketoption"}}, "terms": {"OnDemand":
    {"SKU.TERM": {"priceDimensions": {"SKU.TERM.DIM": {"unit": "Hrs", "pricePerUnit":
    {"USD": "0.0960000000"}}}}}}}. The table of us-east-1 is the catalog's `on_demand`
    prices (../../data/catalog/us-east-1.json); other regions have none until `POST
    /_peer/pricing` {"region": "eu-west-1", "prices": {"m5.large": 0.107, ...}} sets one
    (answers {"region", "count"}). Filters (TERM_MATCH): regionCode selects the table;
    tenancy Dedicated with productFamily "Compute Instance (bare metal)" answers the
    `.metal` types, tenancy Shared with "Compute Instance" the others; the other fields
    must equal the item's attributes (Linux, NA, Used, OnDemand). MaxResults (default and
    cap 100) and NextToken (an offset) page it. Throttling (11) applies to GetProducts as
    to any action, answered as SSM's is (HTTP 400 ThrottlingException).
15. EC2 capacity reservations (ODCRs and Capacity Blocks), which moto lacks, set by 16.
    DescribeCapacityReservations answers the region's reservations in the order posted:
    CapacityReservationId, OwnerId, CapacityReservationArn
    (arn:aws:ec2:REGION:OWNER:capacity-reservation/ID), InstanceType, InstancePlatform
    Linux/UNIX, AvailabilityZone, AvailabilityZoneId (moto's), Tenancy default,
    TotalInstanceCount, AvailableInstanceCount, EbsOptimized and EphemeralStorage
    false, State, StartDate and CreateDate (when posted), EndDate (none when null),
    EndDateType (limited / unlimited), InstanceMatchCriteria, Tags, ReservationType,
    Interruptible. CapacityReservationIds narrows it (an unknown id is
    InvalidCapacityReservationId.NotFound, HTTP 400, for the whole request); filters
    state, owner-id, instance-match-criteria, instance-type, availability-zone,
    instance-platform, tenancy, end-date-type, tag:KEY and tag-key (with * and ?);
    another filter is InvalidParameterValue. MaxResults 1-1000 and NextToken (an
    offset) page it. In an instant CreateFleet (2), an override whose template version
    has CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId
    (or InstanceMarketOptions.MarketType capacity-block) launches into that reservation
    and is not subject to injected ICE; it fails in errorSet, and the next override is
    tried, when the reservation does not exist (InvalidCapacityReservationId.NotFound),
    is not active, is for another instance type or zone, is a Capacity Block without
    MarketType capacity-block or the other way round (InvalidParameterValue "The
    capacity reservation ID (...) does not match ..."), when the fleet is spot
    (InvalidParameterCombination), or when it has fewer than TotalTargetCapacity
    available (ReservationCapacityExceeded "Insufficient capacity in the capacity
    reservation ID."). Otherwise each instance launched takes a slot (available - 1),
    and DescribeInstances shows CapacityReservationId and
    CapacityReservationSpecification {CapacityReservationPreference (the template's, or
    capacity-reservations-only), CapacityReservationTarget {CapacityReservationId}};
    a Capacity Block's instances also show InstanceLifecycle capacity-block.
    DefaultTargetCapacityType capacity-block counts as on-demand (Lifecycle on-demand),
    as any type but spot does. Such a fleet is recorded in /_peer/fleets (12) with
    capacity_type "reserved", and each override with its "capacity_reservation_id"
    (null when its template targets none). As on EC2, an on-demand override whose
    template leaves CapacityReservationPreference open (absent or "open") runs its
    instances, while slots last, in the active open (instance_match_criteria "open")
    ODCRs of its instance type and zone (CapacityReservationId, preference open, no
    target; the fleet stays "on-demand"); preference "none" never does, and
    "capacity-reservations-only" without a target needs slots for every instance
    (else ReservationCapacityExceeded). Instances outside reservations show neither
    field. TerminateInstances of an instance holding a slot gives it back (available +
    1, at most total), once.
16. Capacity reservations. `POST /_peer/capacity-reservations` {"region": "us-east-1",
    "reservations": [{"id": "cr-0a1" (cr- and hex digits), "instance_type":
    "m5.large", "availability_zone": "us-east-1a" (a zone of the region), "total": 2,
    "available": 2 (default total), "instance_match_criteria": "targeted" (default) |
    "open", "owner_id": "123456789012" (default), "tags": {KEY: VALUE} (default {}),
    "reservation_type": "default" (default) | "capacity-block", "end_date":
    "2025-01-01T00:00:00Z" | null (default), "state": "active" (default; any EC2
    state), "interruptible": false (default)}, ...]} replaces the region's
    reservations and answers {"reservations": [...]}, each as stored plus
    "instance_ids" (the instances holding its slots; an instance placed before keeps
    its id's slot when the id is posted again). `GET /_peer/capacity-reservations`
    answers the region's (body {"region"}, default us-east-1) with the current
    "available" counts; `DELETE /_peer/capacity-reservations` forgets every region's
    (instances keep showing theirs). `POST /_peer/capacity-reservations/expire`
    {"region", "id": "cr-0a1"} ends one as EC2 does: state expired; an ODCR's
    instances keep running as plain on-demand ones (no CapacityReservationId,
    CapacityReservationSpecification {CapacityReservationPreference open}); a Capacity
    Block's are terminated. It answers {"reservation": {...}, "released": [instance
    ids], "terminated": [instance ids]}; an unknown id is a 400.
17. Placement groups, which moto lacks, per region. CreatePlacementGroup: GroupName
    (required: MissingParameter; unique among the region's groups not deleted:
    InvalidPlacementGroup.Duplicate "The Placement Group 'NAME' already exists."),
    Strategy cluster | partition | spread (else InvalidParameterValue; absent,
    MissingParameter), PartitionCount 1-7 (default 2; partition only, else
    InvalidParameterCombination; out of range InvalidParameterValue), SpreadLevel host |
    rack (default rack; spread only), TagSpecifications of ResourceType placement-group
    (another type: InvalidParameterValue). It answers the PlacementGroup: GroupName,
    State available, Strategy, PartitionCount (partition groups only), GroupId ("pg-"
    and 17 hex digits), Tags, GroupArn (arn:aws:ec2:REGION:ACCOUNT:placement-group/
    NAME), SpreadLevel (spread groups only). DescribePlacementGroups: every group in
    creation order, narrowed by GroupNames (an unknown one is
    InvalidPlacementGroup.Unknown "The Placement Group 'NAME' is unknown."), GroupIds
    (an unknown one InvalidPlacementGroupId.NotFound, one not pg-HEX
    InvalidPlacementGroupId.Malformed) and the filters group-name, group-id, group-arn,
    state, strategy, spread-level, partition-count, tag:KEY, tag-key (with * and ?;
    another filter is InvalidParameterValue). DeletePlacementGroup (GroupName) forgets
    the group; InvalidPlacementGroup.Unknown when there is none,
    InvalidPlacementGroup.InUse ("The placement group 'NAME' is in use and may not be
    deleted.") while an instance not terminated is in it. Tags are the record's:
    CreateTags does not reach groups.
18. CreateFleet into placement groups. An override's group is its launch template
    version's Placement (GroupId, else GroupName; PartitionNumber), or the override's
    Placement when that names a group (the override's PartitionNumber wins in any case;
    an override's Placement.GroupName is echoed in its answer's overrides). Each failure
    is a CreateFleetError of that override, and the next override is tried: unknown (or
    deleted) group, InvalidPlacementGroup.Unknown "The Placement Group 'REF' is
    unknown."; a group pending or deleting (20), InvalidParameterValue; an instance type
    whose PlacementGroupInfo.SupportedStrategies lacks the group's strategy,
    InvalidParameterCombination ("The instance type TYPE does not support the STRATEGY
    placement group strategy."); spread: when the zone would have more than seven
    instances of the group that are not terminated, InsufficientInstanceCapacity
    "You've reached the limit of instances in this spread placement group. A spread
    placement group can have up to seven instances per Availability Zone."; partition:
    a PartitionNumber outside 1..PartitionCount, InvalidParameterValue (one on a group
    of another strategy, InvalidParameterCombination); without one, each instance goes
    to the partition with the fewest instances of the group that are not terminated
    (the lowest number on ties); cluster: recorded only. DescribeInstances shows
    Placement.GroupName, GroupId and, in a partition group, PartitionNumber, and filters
    placement-group-name.
19. CreateFleet with launch template NetworkInterfaces (moto's launch ignored them).
    The instance's security groups are those of the interface at DeviceIndex 0 on
    NetworkCardIndex 0 (absent: 0), or, without interfaces, SecurityGroupIds. The
    override's subnet is the primary interface's (without a SubnetId in the override,
    the primary interface's own SubnetId, when in the zone asked for); another
    interface takes its own SubnetId, else the instance's. CreateFleetErrors, checked
    against the instance type's NetworkInfo: SecurityGroupIds (or SecurityGroups) with
    interfaces, InvalidParameterCombination "Network interfaces and an instance-level
    security groups may not be specified on the same request"; an unknown group,
    InvalidGroup.NotFound; AssociatePublicIpAddress true with more than one interface,
    InvalidParameterCombination; NetworkCardIndex >= MaximumNetworkCards, more
    interfaces on a card than its MaximumNetworkInterfaces or a DeviceIndex >= it, a
    (card, device index) twice, InvalidParameterValue; InterfaceType efa or efa-only on
    a card whose InterfaceTypes lacks it, or more efa and efa-only interfaces than
    EfaInfo.MaximumEfaInterfaces, InvalidParameterCombination naming the type; an
    efa-only interface that is primary or has Ipv4PrefixCount or
    AssociatePublicIpAddress (either value), InvalidParameterValue. DescribeInstances
    (and DescribeNetworkInterfaces) show every interface: Attachment.DeviceIndex and
    NetworkCardIndex, InterfaceType, its own Groups (else the VPC's default group),
    Ipv4Prefixes (Ipv4PrefixCount /28 prefixes of its subnet, from the top down, held
    until the instance terminates), ConnectionTrackingConfiguration as the template
    asked; efa-only interfaces have no IP address.
20. `POST /_peer/placement-groups/state` {"region" (default us-east-1), "name", "state":
    "pending" | "available" | "deleting" | "deleted"} sets a group's state (a group in
    state deleted stays listed with it, counts as unknown to CreateFleet and
    DeletePlacementGroup, and its name can be taken again); answers {"placement_group":
    {...as DescribePlacementGroups}}; an unknown name or state is a 400.
"""

from __future__ import annotations

import collections
import datetime
import hashlib
import io
import ipaddress
import json
import os
import re
import sys
import threading
import urllib.parse
import uuid

from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.responses import ActionResult
from moto.core.utils import utcnow
from moto.ec2 import utils as ec2_utils
from moto.ec2.exceptions import (
    EC2ClientError,
    InvalidInstanceIdError,
    MissingParameterError,
)
from moto.ec2.models import ec2_backends
from moto.ec2.models.amis import Ami
from moto.ec2.models.elastic_network_interfaces import NetworkInterface
from moto.ec2.models.fleets import Fleet
from moto.ec2.models.instance_types import INSTANCE_TYPE_OFFERINGS, INSTANCE_TYPES
from moto.ec2.responses import EC2Response
from moto.ec2.utils import (
    filter_iam_instance_profiles,
    random_eni_attach_id,
    random_fleet_id,
)
from moto.iam.exceptions import NotFoundException as IAMNotFound
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from moto.ssm.models import Parameter, ssm_backends
from werkzeug.serving import make_server

HERE = os.path.dirname(os.path.abspath(__file__))
CATALOG = os.path.join(HERE, "..", "..", "data", "catalog", "us-east-1.json")
CATALOG_REGION = "us-east-1"

ACCOUNT = DEFAULT_ACCOUNT_ID
EKS_OWNER = "602401143452"
K8S_VERSION = "1.33"
AMI_RELEASE = "v20241115"
AMI_CREATION_DATE = "2024-11-15T00:00:00.000Z"
# (arch, variant) of the seeded EKS-optimized AL2023 images.
AL2023_VARIANTS = [
    ("x86_64", "standard"),
    ("arm64", "standard"),
    ("x86_64", "nvidia"),
    ("x86_64", "neuron"),
]

LOCK = threading.RLock()


# --- shared state of the test controls -------------------------------------------------


def load_on_demand_prices() -> dict[str, float]:
    with open(CATALOG, encoding="utf-8") as f:
        catalog = json.load(f)
    return {
        it["name"]: it["on_demand"]
        for it in catalog["instance_types"]
        if it.get("on_demand")
    }


class State:
    def __init__(self) -> None:
        self.ice: list[dict] = []
        self.throttles: dict[str, int] = {}
        self.requests: list[dict] = []
        self.fleets: list[dict] = []
        self.seeded: set[str] = set()
        self.pricing: dict[str, dict[str, float]] = {
            CATALOG_REGION: load_on_demand_prices()
        }
        self.ami_ids: set[tuple[str, str]] = set()
        # region -> capacity reservations (15), in the order posted.
        self.capacity_reservations: dict[str, list[dict]] = {}
        # instance id -> (region, reservation id) while it holds a reservation's slot.
        self.reserved_instances: dict[str, tuple[str, str]] = {}
        # region -> placement groups (17), in the order created.
        self.placement_groups: dict[str, list[dict]] = {}
        # instance id -> [(subnet, "a.b.c.d/28")]: its interfaces' prefixes (19).
        self.instance_prefixes: dict[str, list[tuple]] = {}


STATE = State()


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def deterministic_ami_id(region: str, name: str) -> str:
    """ "ami-" and the first 17 hex digits of sha256(name): the same name gives the same id
    in every run and every region; a name registered again in a region gets the digits
    of sha256("NAME#2"), then "NAME#3", ..."""
    n = 1
    while True:
        key = name if n == 1 else f"{name}#{n}"
        ami_id = "ami-" + hashlib.sha256(key.encode()).hexdigest()[:17]
        if (region, ami_id) not in STATE.ami_ids:
            return ami_id
        n += 1


def parse_time(text: str | None) -> datetime.datetime:
    if not text:
        return now()
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def register_ami(
    region: str,
    name: str,
    architecture: str,
    creation_date: str | None,
    tags: dict | None = None,
    owner: str | None = EKS_OWNER,
) -> str:
    backend = ec2_backends[ACCOUNT][region]
    owner = owner or EKS_OWNER
    with LOCK:
        ami_id = deterministic_ami_id(region, name)
        STATE.ami_ids.add((region, ami_id))
        ami = Ami(
            backend,
            ami_id,
            name=name,
            description=f"EKS-optimized image {name}",
            owner_id=owner,
            owner_alias="amazon" if owner == EKS_OWNER else None,
            public=owner == EKS_OWNER,
            virtualization_type="hvm",
            architecture=architecture,
            state="available",
            creation_date=parse_time(creation_date),
            image_location=f"amazon/{name}",
            hypervisor="xen",
            root_device_type="ebs",
            root_device_name="/dev/xvda",
            sriov="simple",
            region_name=region + "a",
            boot_mode="uefi-preferred",
            tags=tags or None,
        )
        backend.amis[ami_id] = ami
    return ami_id


def set_ssm(region: str, name: str, value: str) -> int:
    """Writes a parameter straight into moto's store (PutParameter refuses /aws/ names)."""
    backend = ssm_backends[ACCOUNT][region]
    with LOCK:
        versions = backend._parameters[name]
        version = versions[-1].version + 1 if versions else 1
        versions.append(
            Parameter(
                account_id=ACCOUNT,
                name=name,
                value=value,
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=now(),
                version=version,
                data_type="text",
                tier="Standard",
            )
        )
    return version


def al2023_param(arch: str, variant: str, leaf: str = "recommended") -> str:
    return (
        f"/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2023/"
        f"{arch}/{variant}/{leaf}/image_id"
    )


def seed_region(region: str) -> None:
    with LOCK:
        if region in STATE.seeded:
            return
        STATE.seeded.add(region)
        for arch, variant in AL2023_VARIANTS:
            name = f"amazon-eks-node-al2023-{arch}-{variant}-{K8S_VERSION}-{AMI_RELEASE}"
            ami_id = register_ami(region, name, arch, AMI_CREATION_DATE)
            set_ssm(region, al2023_param(arch, variant), ami_id)
            set_ssm(region, al2023_param(arch, variant, name), ami_id)


# --- the catalog's spot prices ---------------------------------------------------------


def load_spot_prices() -> list[tuple[str, str, float]]:
    with open(CATALOG, encoding="utf-8") as f:
        catalog = json.load(f)
    rows = []
    for it in catalog["instance_types"]:
        for zone, price in sorted((it.get("spot") or {}).items()):
            rows.append((it["name"], zone, price))
    rows.sort()
    return rows


SPOT_PRICES = load_spot_prices()
SPOT_DESCRIPTIONS = ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"]


def describe_spot_price_history(self) -> ActionResult:
    types = set(self._get_param("InstanceTypes", []) or [])
    zone = self._get_param("AvailabilityZone")
    descriptions = list(self._get_param("ProductDescriptions", []) or [])
    filters = self._filters_from_querystring()
    type_values = set(filters.get("instance-type", []))
    zone_values = set(filters.get("availability-zone", []))
    description_values = filters.get("product-description", [])
    wanted = [
        d
        for d in SPOT_DESCRIPTIONS
        if (not descriptions or d in descriptions)
        and (not description_values or d in description_values)
    ]
    if not descriptions and not description_values:
        wanted = ["Linux/UNIX"]
    stamp = now().replace(microsecond=0)
    rows = []
    for itype, z, price in SPOT_PRICES if self.region == CATALOG_REGION else []:
        if types and itype not in types:
            continue
        if type_values and itype not in type_values:
            continue
        if zone and z != zone:
            continue
        if zone_values and z not in zone_values:
            continue
        for d in wanted:
            rows.append(
                {
                    "InstanceType": itype,
                    "ProductDescription": d,
                    "SpotPrice": f"{price:.6f}",
                    "AvailabilityZone": z,
                    "Timestamp": stamp,
                }
            )
    start, size = page_bounds(self, "DescribeSpotPriceHistory", 1, 10000, 1000)
    return ActionResult(paged(rows, start, min(size, 1000), "SpotPriceHistory"))


# --- capacity reservations (15, 16) ---------------------------------------------------

CR_ID = re.compile(r"^cr-[0-9a-f]+$")
CR_STATES = (
    "active",
    "expired",
    "cancelled",
    "pending",
    "failed",
    "scheduled",
    "payment-pending",
    "payment-failed",
    "assessing",
    "delayed",
    "unsupported",
)
# DescribeCapacityReservations' filters besides tag:KEY and tag-key: what each reads.
CR_FILTERS = {
    "state": lambda r: r["state"],
    "owner-id": lambda r: r["owner_id"],
    "instance-match-criteria": lambda r: r["instance_match_criteria"],
    "instance-type": lambda r: r["instance_type"],
    "availability-zone": lambda r: r["availability_zone"],
    "instance-platform": lambda r: "Linux/UNIX",
    "tenancy": lambda r: "default",
    "end-date-type": lambda r: "limited" if r["end_date"] else "unlimited",
}


def parse_reservation(region: str, item: dict) -> dict:
    """One reservation of a `POST /_peer/capacity-reservations` body, with its defaults;
    ValueError (the control's 400) for a bad field."""
    cr_id = item["id"]
    if not isinstance(cr_id, str) or not CR_ID.match(cr_id):
        raise ValueError(f"id {cr_id!r} is not cr- and hex digits")
    zone = item["availability_zone"]
    if ec2_backends[ACCOUNT][region].get_zone_by_name(zone) is None:
        raise ValueError(f"availability_zone {zone!r} is not a zone of {region}")
    total = item["total"]
    available = item.get("available", total)
    for name, value in (("total", total), ("available", available)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} {value!r} is not a count")
    if available > total:
        raise ValueError(f"available {available} is more than total {total}")
    criteria = item.get("instance_match_criteria", "targeted")
    if criteria not in ("open", "targeted"):
        raise ValueError(f"instance_match_criteria {criteria!r}")
    reservation_type = item.get("reservation_type", "default")
    if reservation_type not in ("default", "capacity-block"):
        raise ValueError(f"reservation_type {reservation_type!r}")
    state = item.get("state", "active")
    if state not in CR_STATES:
        raise ValueError(f"state {state!r}")
    end_date = item.get("end_date")
    if end_date is not None:
        parse_time(end_date)
    tags = item.get("tags") or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
        raise ValueError(f"tags {tags!r} are not strings")
    return {
        "id": cr_id,
        "instance_type": str(item["instance_type"]),
        "availability_zone": zone,
        "total": total,
        "available": available,
        "instance_match_criteria": criteria,
        "owner_id": str(item.get("owner_id") or ACCOUNT),
        "tags": dict(tags),
        "reservation_type": reservation_type,
        "end_date": end_date,
        "state": state,
        "interruptible": bool(item.get("interruptible", False)),
        "_created": now().replace(microsecond=0),
    }


def reservation_view(region: str, record: dict) -> dict:
    """A reservation as the controls answer it: its fields and the instances in it."""
    view = {k: v for k, v in record.items() if not k.startswith("_")}
    view["instance_ids"] = sorted(
        iid
        for iid, (r, cr_id) in STATE.reserved_instances.items()
        if r == region and cr_id == record["id"]
    )
    return view


def find_reservation(region: str, cr_id: str) -> dict | None:
    for record in STATE.capacity_reservations.get(region, []):
        if record["id"] == cr_id:
            return record
    return None


def place_in_reservation(
    backend, instance_id: str, cr_id: str, preference: str, targeted: bool
) -> None:
    """The instance reports the reservation in DescribeInstances (CapacityReservationId,
    CapacityReservationSpecification, with the target when its template named one) and
    holds one of its slots."""
    instance = backend.get_instance(instance_id)
    instance.capacity_reservation_id = cr_id
    spec: dict = {"CapacityReservationPreference": preference}
    if targeted:
        spec["CapacityReservationTarget"] = {"CapacityReservationId": cr_id}
    instance.capacity_reservation_specification = spec
    STATE.reserved_instances[instance_id] = (backend.region_name, cr_id)


def expire_reservation(region: str, cr_id: str) -> dict:
    """16: the reservation ends. An ODCR's instances keep running as plain on-demand
    ones (no CapacityReservationId, preference open); a Capacity Block's are
    terminated."""
    backend = ec2_backends[ACCOUNT][region]
    record = find_reservation(region, cr_id)
    if record is None:
        raise ValueError(f"no capacity reservation {cr_id} in {region}")
    ids = reservation_view(region, record)["instance_ids"]
    record["state"] = "expired"
    released, terminated = [], []
    for iid in ids:
        del STATE.reserved_instances[iid]
        instance = backend.get_instance(iid)
        if record["reservation_type"] == "capacity-block":
            if instance.state != "terminated":
                backend.terminate_instances([iid])
                terminated.append(iid)
            continue
        instance.capacity_reservation_id = None
        instance.capacity_reservation_specification = {
            "CapacityReservationPreference": "open"
        }
        released.append(iid)
    return {
        "reservation": reservation_view(region, record),
        "released": released,
        "terminated": terminated,
    }


def release_reservation_slot(instance_id: str) -> None:
    """A terminated instance gives its reservation's slot back, once."""
    held = STATE.reserved_instances.pop(instance_id, None)
    if held is None:
        return
    record = find_reservation(*held)
    if record is not None:
        record["available"] = min(record["available"] + 1, record["total"])


def describe_capacity_reservations(self) -> ActionResult:
    self.error_on_dryrun()
    ids = list(self._get_param("CapacityReservationIds", []) or [])
    filters = self._filters_from_querystring()
    start, size = page_bounds(self, "DescribeCapacityReservations", 1, 1000, 1000)
    with LOCK:
        records = [dict(r) for r in STATE.capacity_reservations.get(self.region, [])]
    known = {r["id"] for r in records}
    for cr_id in ids:
        if cr_id not in known:
            raise EC2ClientError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{cr_id}' does not exist",
            )
    if ids:
        records = [r for r in records if r["id"] in ids]
    records = filter_records(records, filters, CR_FILTERS)
    rows = [reservation_result(self.ec2_backend, r) for r in records]
    return ActionResult(paged(rows, start, size, "CapacityReservations"))


def filter_records(records: list[dict], filters: dict, fields: dict) -> list[dict]:
    """The records (each with a "tags" dict) an EC2 Describe call's filters keep:
    tag:KEY, tag-key, and each name of `fields` (what it reads; None never matches),
    with * and ? wildcards; any other filter is InvalidParameterValue."""
    for name, values in filters.items():
        pattern = wildcard(values)
        if name.startswith("tag:"):
            key = name[len("tag:") :]
            records = [
                r for r in records if key in r["tags"] and pattern.match(r["tags"][key])
            ]
        elif name == "tag-key":
            records = [r for r in records if any(pattern.match(k) for k in r["tags"])]
        elif name in fields:
            records = [
                r
                for r in records
                if fields[name](r) is not None and pattern.match(str(fields[name](r)))
            ]
        else:
            raise EC2ClientError(
                "InvalidParameterValue", f"The filter '{name}' is invalid"
            )
    return records


def reservation_result(backend, r: dict) -> dict:
    """One CapacityReservation of DescribeCapacityReservations."""
    region = backend.region_name
    out = {
        "CapacityReservationId": r["id"],
        "OwnerId": r["owner_id"],
        "CapacityReservationArn": (
            f"arn:aws:ec2:{region}:{r['owner_id']}:capacity-reservation/{r['id']}"
        ),
        "InstanceType": r["instance_type"],
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": r["availability_zone"],
        "Tenancy": "default",
        "TotalInstanceCount": r["total"],
        "AvailableInstanceCount": r["available"],
        "EbsOptimized": False,
        "EphemeralStorage": False,
        "State": r["state"],
        "StartDate": r["_created"],
        "EndDateType": "limited" if r["end_date"] else "unlimited",
        "InstanceMatchCriteria": r["instance_match_criteria"],
        "CreateDate": r["_created"],
        "Tags": [{"Key": k, "Value": v} for k, v in r["tags"].items()],
        "ReservationType": r["reservation_type"],
        "Interruptible": r["interruptible"],
    }
    zone = backend.get_zone_by_name(r["availability_zone"])
    if zone is not None:
        out["AvailabilityZoneId"] = zone.zone_id
    if r["end_date"]:
        end = parse_time(r["end_date"])
        out["EndDate"] = end if end.tzinfo else end.replace(tzinfo=datetime.UTC)
    return out


# --- placement groups (17, 18, 20) ---------------------------------------------------

PG_STRATEGIES = ("cluster", "partition", "spread")
PG_SPREAD_LEVELS = ("host", "rack")
PG_STATES = ("pending", "available", "deleting", "deleted")
PG_ID = re.compile(r"^pg-[0-9a-f]+$")
PG_MAX_PARTITIONS = 7
SPREAD_MAX_PER_ZONE = 7
SPREAD_FULL = (
    "You've reached the limit of instances in this spread placement group. A spread "
    "placement group can have up to seven instances per Availability Zone."
)
# DescribePlacementGroups' filters besides tag:KEY and tag-key: what each reads.
PG_FILTERS = {
    "group-name": lambda g: g["name"],
    "group-id": lambda g: g["id"],
    "group-arn": lambda g: g["arn"],
    "state": lambda g: g["state"],
    "strategy": lambda g: g["strategy"],
    "spread-level": lambda g: g["spread_level"],
    "partition-count": lambda g: g["partition_count"],
}


def unknown_group(ref: str) -> EC2ClientError:
    return EC2ClientError(
        "InvalidPlacementGroup.Unknown", f"The Placement Group '{ref}' is unknown."
    )


def find_group(region: str, group_id=None, name=None, live=True) -> dict | None:
    """The region's placement group with that id (else that name); with `live`, one
    in state deleted counts as gone, as EC2 treats a deleted group."""
    for g in STATE.placement_groups.get(region, []):
        if live and g["state"] == "deleted":
            continue
        if (group_id and g["id"] == group_id) or (not group_id and g["name"] == name):
            return g
    return None


def group_members(backend, group_id: str) -> list:
    """The instances of a placement group that are not terminated."""
    return [
        i
        for i in backend.all_instances()
        if i.state != "terminated"
        and getattr(i.placement, "group_id", None) == group_id
    ]


def placement_group_result(g: dict) -> dict:
    """One PlacementGroup as CreatePlacementGroup and DescribePlacementGroups answer it:
    PartitionCount for partition groups only, SpreadLevel for spread groups only."""
    out = {
        "GroupName": g["name"],
        "State": g["state"],
        "Strategy": g["strategy"],
        "GroupId": g["id"],
        "Tags": [{"Key": k, "Value": v} for k, v in g["tags"].items()],
        "GroupArn": g["arn"],
    }
    if g["partition_count"] is not None:
        out["PartitionCount"] = g["partition_count"]
    if g["spread_level"] is not None:
        out["SpreadLevel"] = g["spread_level"]
    return out


def placement_group_tags(specs: list) -> dict[str, str]:
    """The tags of CreatePlacementGroup's TagSpecifications (ResourceType
    placement-group; another type is InvalidParameterValue)."""
    tags: dict[str, str] = {}
    for spec in specs:
        rtype = spec.get("ResourceType")
        if rtype != "placement-group":
            raise EC2ClientError(
                "InvalidParameterValue",
                f"'{rtype}' is not a valid taggable resource type for this operation.",
            )
        for tag in spec.get("Tags") or []:
            tags[tag["Key"]] = tag.get("Value", "")
    return tags


def strategy_options(strategy, partition_count, spread_level) -> tuple:
    """(partition count, spread level) of a new group, checked as EC2 does: partition
    count 1-7 (default 2) for partition groups only, spread level host or rack (default
    rack) for spread groups only."""
    if strategy not in PG_STRATEGIES:
        raise EC2ClientError(
            "InvalidParameterValue",
            f"Value ({strategy}) for parameter strategy is invalid. "
            f"Valid values are: {', '.join(PG_STRATEGIES)}",
        )
    if partition_count is not None and strategy != "partition":
        raise EC2ClientError(
            "InvalidParameterCombination",
            "PartitionCount can only be specified with the partition strategy.",
        )
    if spread_level is not None and strategy != "spread":
        raise EC2ClientError(
            "InvalidParameterCombination",
            "SpreadLevel can only be specified with the spread strategy.",
        )
    if strategy == "partition":
        count = 2 if partition_count is None else int(partition_count)
        if not 1 <= count <= PG_MAX_PARTITIONS:
            raise EC2ClientError(
                "InvalidParameterValue",
                f"Value ({count}) for parameter partitionCount is invalid. "
                f"It must be between 1 and {PG_MAX_PARTITIONS}.",
            )
        return count, None
    if strategy == "spread":
        level = spread_level or "rack"
        if level not in PG_SPREAD_LEVELS:
            raise EC2ClientError(
                "InvalidParameterValue",
                f"Value ({level}) for parameter spreadLevel is invalid. "
                "Valid values are: host, rack",
            )
        return None, level
    return None, None


def create_placement_group(self) -> ActionResult:
    """17: CreatePlacementGroup, into the region's groups."""
    name = self._get_param("GroupName")
    strategy = self._get_param("Strategy")
    if not name:
        raise MissingParameterError("groupName")
    if not strategy:
        raise MissingParameterError("strategy")
    if len(name) > 255 or not name.isascii():
        raise EC2ClientError(
            "InvalidParameterValue",
            f"Value ({name}) for parameter groupName is invalid. "
            "It must be up to 255 ASCII characters.",
        )
    partition_count, spread_level = strategy_options(
        strategy, self._get_param("PartitionCount"), self._get_param("SpreadLevel")
    )
    tags = placement_group_tags(self._get_param("TagSpecifications", []) or [])
    self.error_on_dryrun()
    with LOCK:
        if find_group(self.region, name=name) is not None:
            raise EC2ClientError(
                "InvalidPlacementGroup.Duplicate",
                f"The Placement Group '{name}' already exists.",
            )
        groups = STATE.placement_groups.setdefault(self.region, [])
        groups[:] = [g for g in groups if g["name"] != name]
        record = {
            "id": "pg-" + uuid.uuid4().hex[:17],
            "name": name,
            "arn": f"arn:aws:ec2:{self.region}:{ACCOUNT}:placement-group/{name}",
            "strategy": strategy,
            "partition_count": partition_count,
            "spread_level": spread_level,
            "state": "available",
            "tags": tags,
        }
        groups.append(record)
        return ActionResult({"PlacementGroup": placement_group_result(record)})


def describe_placement_groups(self) -> ActionResult:
    """17: DescribePlacementGroups: GroupNames (an unknown one is
    InvalidPlacementGroup.Unknown), GroupIds (InvalidPlacementGroupId.NotFound, or
    .Malformed), and filters."""
    self.error_on_dryrun()
    names = list(self._get_param("GroupNames", []) or [])
    ids = list(self._get_param("GroupIds", []) or [])
    filters = self._filters_from_querystring()
    with LOCK:
        groups = [dict(g) for g in STATE.placement_groups.get(self.region, [])]
    for name in names:
        if not any(g["name"] == name for g in groups):
            raise unknown_group(name)
    for group_id in ids:
        if not PG_ID.match(group_id):
            raise EC2ClientError(
                "InvalidPlacementGroupId.Malformed",
                f'Invalid id: "{group_id}" (expecting "pg-...")',
            )
        if not any(g["id"] == group_id for g in groups):
            raise EC2ClientError(
                "InvalidPlacementGroupId.NotFound",
                f"The Placement Group ID '{group_id}' does not exist.",
            )
    if names:
        groups = [g for g in groups if g["name"] in names]
    if ids:
        groups = [g for g in groups if g["id"] in ids]
    groups = filter_records(groups, filters, PG_FILTERS)
    return ActionResult(
        {"PlacementGroups": [placement_group_result(g) for g in groups]}
    )


def delete_placement_group(self) -> ActionResult:
    """17: DeletePlacementGroup; InvalidPlacementGroup.InUse while an instance that is
    not terminated is in it."""
    name = self._get_param("GroupName")
    if not name:
        raise MissingParameterError("groupName")
    self.error_on_dryrun()
    with LOCK:
        group = find_group(self.region, name=name)
        if group is None:
            raise unknown_group(name)
        if group_members(self.ec2_backend, group["id"]):
            raise EC2ClientError(
                "InvalidPlacementGroup.InUse",
                f"The placement group '{name}' is in use and may not be deleted.",
            )
        STATE.placement_groups[self.region].remove(group)
    return ActionResult({"Return": True})


def set_placement_group_state(region: str, name: str, state: str) -> dict:
    """20: sets a group's state (the newest group of that name, deleted ones too)."""
    if state not in PG_STATES:
        raise ValueError(f"state {state!r} is not one of {PG_STATES}")
    group = find_group(region, name=name) or find_group(region, name=name, live=False)
    if group is None:
        raise ValueError(f"no placement group {name!r} in {region}")
    group["state"] = state
    return {"placement_group": placement_group_result(group)}


def placement_request(data: dict, override: dict) -> dict:
    """The placement a fleet override asks for: GroupId, GroupName and PartitionNumber
    of the launch template's Placement, or of the override's when it names a group (its
    PartitionNumber wins in any case)."""
    template = data.get("Placement") or {}
    mine = override.get("Placement") or {}
    source = mine if (mine.get("GroupId") or mine.get("GroupName")) else template
    out = {
        k: source[k]
        for k in ("GroupId", "GroupName", "PartitionNumber")
        if source.get(k) not in (None, "")
    }
    if mine.get("PartitionNumber") is not None:
        out["PartitionNumber"] = mine["PartitionNumber"]
    if "PartitionNumber" in out:
        out["PartitionNumber"] = int(out["PartitionNumber"])
    return out


def plan_placement(backend, c, capacity_type, count, honour_ice) -> tuple | None:
    """18: the placement group of one override's launch, as c["plan"] {"group",
    "partitions" (one per instance, partition groups only)}, or (code, message) of the
    CreateFleetError that stops it: unknown or unavailable group, a strategy the
    instance type does not support, a full spread zone, a bad partition number."""
    c["plan"] = None
    want = c["placement"]
    ref = want.get("GroupId") or want.get("GroupName")
    if not ref:
        return None
    region = backend.region_name
    group = find_group(region, want.get("GroupId"), want.get("GroupName"))
    if group is None:
        return (
            "InvalidPlacementGroup.Unknown",
            f"The Placement Group '{ref}' is unknown.",
        )
    problem = group_problem(backend, c, group, count)
    if problem:
        return problem
    partitions = None
    if group["strategy"] == "partition":
        partitions, problem = assign_partitions(
            backend, c, group, capacity_type, count, honour_ice
        )
        if problem:
            return problem
    elif want.get("PartitionNumber") is not None:
        return (
            "InvalidParameterCombination",
            (
                "A partition number can only be specified for a partition placement "
                f"group ('{group['name']}' is {group['strategy']})."
            ),
        )
    c["plan"] = {"group": group, "partitions": partitions}
    return None


def group_problem(backend, c, group, count) -> tuple | None:
    """Why a launch of `count` instances of c's type and zone cannot go into the group:
    not available, a strategy the type lacks, or (spread) seven in the zone already."""
    if group["state"] != "available":
        return (
            "InvalidPlacementGroup.Unknown"
            if group["state"] == "deleted"
            else "InvalidParameterValue",
            (
                f"The Placement Group '{group['name']}' is not available "
                f"(state {group['state']})."
            ),
        )
    itype = c["instance_type"]
    info = (INSTANCE_TYPES.get(itype) or {}).get("PlacementGroupInfo")
    if info is not None and group["strategy"] not in info["SupportedStrategies"]:
        return (
            "InvalidParameterCombination",
            (
                f"The instance type {itype} does not support the {group['strategy']} "
                "placement group strategy."
            ),
        )
    if group["strategy"] == "spread":
        in_zone = [
            i
            for i in group_members(backend, group["id"])
            if i.placement.zone == c["zone"]
        ]
        if len(in_zone) + count > SPREAD_MAX_PER_ZONE:
            return "InsufficientInstanceCapacity", SPREAD_FULL
    return None


def assign_partitions(backend, c, group, capacity_type, count, honour_ice) -> tuple:
    """(partitions, problem): the partition of each of `count` instances. A
    PartitionNumber asked for must be 1..PartitionCount (InvalidParameterValue);
    otherwise, as EC2 does, each instance goes to the partition with the fewest
    instances of the group that are not terminated (the lowest number on ties), leaving
    out partitions injected ICE (10) fails (none left: InsufficientInstanceCapacity)."""
    total = group["partition_count"]
    asked = c["placement"].get("PartitionNumber")
    if asked is not None:
        if not 1 <= asked <= total:
            return None, (
                "InvalidParameterValue",
                (
                    f"Value ({asked}) for parameter partitionNumber is invalid. The "
                    f"placement group '{group['name']}' has partitions 1 to {total}."
                ),
            )
        return [asked] * count, None
    loads = collections.Counter(
        getattr(i.placement, "partition_number", None)
        for i in group_members(backend, group["id"])
    )
    allowed = [
        p
        for p in range(1, total + 1)
        if not (
            honour_ice
            and is_ice(c["instance_type"], c["zone"], capacity_type, group["id"], p)
        )
    ]
    if not allowed:
        return None, ("InsufficientInstanceCapacity", ice_message(c))
    out = []
    for _ in range(count):
        p = min(allowed, key=lambda n: (loads[n], n))
        loads[p] += 1
        out.append(p)
    return out, None


def place_instance(instance, plan: dict | None, index: int) -> None:
    """DescribeInstances shows the group in Placement: GroupName, GroupId and, in a
    partition group, PartitionNumber."""
    if not plan:
        return
    group = plan["group"]
    instance.placement.group_name = group["name"]
    instance.placement.group_id = group["id"]
    if plan["partitions"]:
        instance.placement.partition_number = plan["partitions"][index]


# --- CreateFleet (instant) -------------------------------------------------------------

ORIGINAL_CREATE_FLEET = EC2Response.create_fleet


def is_ice(
    instance_type: str,
    zone: str,
    capacity_type: str,
    group_id: str | None = None,
    partition: int | None = None,
) -> bool:
    """Whether injected ICE (10) fails this launch: a pair of its type and zone (and
    capacity type, unless null) without a placement group, or with this launch's group
    and (unless null) its partition."""
    with LOCK:
        for pair in STATE.ice:
            if pair["instance_type"] != instance_type or pair["zone"] != zone:
                continue
            if pair.get("capacity_type") not in (None, capacity_type):
                continue
            if pair.get("placement_group") is None:
                return True
            if pair["placement_group"] == group_id and pair.get("partition") in (
                None,
                partition,
            ):
                return True
    return False


def ice_message(c: dict) -> str:
    return (
        f"We currently do not have sufficient {c['instance_type']} capacity in the "
        f"Availability Zone you requested ({c['zone']}). Our system will be working on "
        "provisioning additional capacity."
    )


def launch_is_ice(c: dict, capacity_type: str) -> bool:
    """Whether injected ICE fails the override's launch, into its placement group and
    partitions when it has them."""
    plan = c.get("plan") or {}
    group_id = plan["group"]["id"] if plan.get("group") else None
    partitions = set(plan.get("partitions") or [None])
    return any(
        is_ice(c["instance_type"], c["zone"], capacity_type, group_id, p)
        for p in partitions
    )


def attempt(backend, fleet_id, c, capacity_type, count, tags) -> dict:
    """One override of an instant fleet: a CreateFleetError when its template's network
    interfaces (19) or placement group (18) do not fit its instance type and zone; else
    it launches into its capacity reservation (15), or, unless injected ICE (10) fails
    it, as on-demand or spot capacity."""
    reserved = bool(c["reservation_id"] or c["market_type"] == "capacity-block")
    problem = check_interfaces(backend, c) or plan_placement(
        backend, c, capacity_type, count, not reserved
    )
    if problem:
        return fleet_error(c, capacity_type, *problem)
    if reserved:
        # Reserved capacity is not subject to injected ICE (15).
        return launch_reserved(backend, fleet_id, c, capacity_type, count, tags)
    if launch_is_ice(c, capacity_type):
        return fleet_error(
            c, capacity_type, "InsufficientInstanceCapacity", ice_message(c)
        )
    return launch_open(backend, fleet_id, c, capacity_type, count, tags)


def create_fleet(self) -> ActionResult:
    fleet_type = self._get_param("Type", if_none="maintain")
    if fleet_type != "instant":
        return ORIGINAL_CREATE_FLEET(self)
    self.error_on_dryrun()
    backend = self.ec2_backend
    spot_options = self._get_param("SpotOptions", {}) or {}
    on_demand_options = self._get_param("OnDemandOptions", {}) or {}
    tcs = self._get_param("TargetCapacitySpecification", {}) or {}
    configs = self._get_param("LaunchTemplateConfigs", []) or []
    tag_specs = self._get_param("TagSpecifications", []) or []

    total = int(tcs.get("TotalTargetCapacity") or 0)
    default_type = tcs.get("DefaultTargetCapacityType")
    if default_type:
        capacity_type = "spot" if default_type == "spot" else "on-demand"
    elif int(tcs.get("SpotTargetCapacity") or 0) > 0:
        capacity_type = "spot"
    else:
        capacity_type = "on-demand"

    tags: dict[str, dict[str, str]] = {}
    for spec in tag_specs:
        rtype = spec.get("ResourceType")
        for tag in spec.get("Tags", []) or []:
            tags.setdefault(rtype, {})[tag["Key"]] = tag.get("Value", "")

    # Every (template, override) in the order given, then by Priority when any is set.
    given = []
    for config in configs:
        lts = config.get("LaunchTemplateSpecification", {}) or {}
        if lts.get("LaunchTemplateId"):
            template = backend.get_launch_template(lts["LaunchTemplateId"])
        elif lts.get("LaunchTemplateName"):
            template = backend.get_launch_template_by_name(lts["LaunchTemplateName"])
        else:
            raise EC2ClientError(
                "InvalidParameterValue",
                "A launch template ID or name must be specified",
            )
        version = template.get_version(str(lts.get("Version") or "$Default"))
        for override in config.get("Overrides") or [{}]:
            given.append(resolve_override(backend, template, version, override))
    candidates = list(given)
    if any(c["override"].get("Priority") is not None for c in candidates):
        candidates.sort(key=priority_of)

    fleet_id = random_fleet_id()
    errors = []
    instances = []
    recorded_overrides = [
        {
            "launch_template_id": c["template"].id,
            "version": str(c["version"].number),
            "instance_type": c["instance_type"],
            "subnet_id": c["subnet_id"],
            "availability_zone": c["zone"],
            "image_id": c["override"].get("ImageId"),
            "priority": c["override"].get("Priority"),
            "capacity_reservation_id": c["reservation_id"],
        }
        for c in given
    ]
    for c in candidates:
        with LOCK:
            outcome = attempt(backend, fleet_id, c, capacity_type, total, tags)
        if "ErrorCode" in outcome:
            errors.append(outcome)
            continue
        instances.append(outcome)
        break

    fleet = Fleet(
        backend,
        fleet_id,
        on_demand_options,
        spot_options,
        {"TotalTargetCapacity": 0},
        [],
        None,
        False,
        True,
        "instant",
        None,
        None,
        [
            {
                "ResourceType": "fleet",
                "Tags": [
                    {"Key": k, "Value": v} for k, v in tags.get("fleet", {}).items()
                ],
            }
        ],
    )
    fleet.target_capacity = total
    for item in instances:
        for iid in item["InstanceIds"]:
            fleet.on_demand_instances.append(
                {"id": None, "instance": backend.get_instance(iid), "launch_spec": None}
            )
    fleet.fulfilled_capacity = float(sum(len(i["InstanceIds"]) for i in instances))
    backend.fleets[fleet_id] = fleet

    with LOCK:
        STATE.fleets.append(
            {
                "fleet_id": fleet_id,
                "type": fleet_type,
                "capacity_type": (
                    "reserved"
                    if any(c["reservation_id"] for c in given)
                    else capacity_type
                ),
                "total_target_capacity": total,
                "spot_allocation_strategy": spot_options.get("AllocationStrategy"),
                "on_demand_allocation_strategy": on_demand_options.get(
                    "AllocationStrategy"
                ),
                "overrides": recorded_overrides,
                "errors": [
                    {
                        "instance_type": e["LaunchTemplateAndOverrides"]["Overrides"].get(
                            "InstanceType"
                        ),
                        "availability_zone": e["LaunchTemplateAndOverrides"][
                            "Overrides"
                        ].get("AvailabilityZone"),
                        "error_code": e["ErrorCode"],
                    }
                    for e in errors
                ],
                "instance_ids": [i for item in instances for i in item["InstanceIds"]],
                "tags": tags,
            }
        )
    return ActionResult({"FleetId": fleet_id, "Errors": errors, "Instances": instances})


def priority_of(candidate: dict) -> float:
    priority = candidate["override"].get("Priority")
    return float("inf") if priority is None else float(priority)


def resolve_override(backend, template, version, override) -> dict:
    """One override with its instance type, subnet id, zone and response
    LaunchTemplateAndOverrides: the zone comes from the subnet when not given; a zone
    without a subnet launches into the zone's default subnet. Without a SubnetId the
    template's primary network interface's subnet is used (when in the zone asked for);
    the override's SubnetId replaces it, as on EC2."""
    data = version.data
    interfaces = interfaces_of(data)
    instance_type = override.get("InstanceType") or data.get("InstanceType")
    subnet_id = override.get("SubnetId")
    zone = override.get("AvailabilityZone")
    own_subnet = (primary_interface(interfaces) or {}).get("SubnetId")
    if (not subnet_id and own_subnet) and (
        not zone or backend.get_subnet(own_subnet).availability_zone == zone
    ):
        subnet_id = own_subnet
    if subnet_id and not zone:
        zone = backend.get_subnet(subnet_id).availability_zone
    if zone and not subnet_id:
        subnet_id = next(
            (
                s.id
                for s in backend.describe_subnets(filters={"availability-zone": zone})
                if s.default_for_az
            ),
            None,
        )
    out = {"InstanceType": instance_type}
    if subnet_id:
        out["SubnetId"] = subnet_id
    if zone:
        out["AvailabilityZone"] = zone
    if override.get("ImageId"):
        out["ImageId"] = override["ImageId"]
    if override.get("Priority") is not None:
        out["Priority"] = float(override["Priority"])
    if (override.get("Placement") or {}).get("GroupName"):
        out["Placement"] = {"GroupName": override["Placement"]["GroupName"]}
    lto = {
        "LaunchTemplateSpecification": {
            "LaunchTemplateId": template.id,
            "Version": str(version.number),
        },
        "Overrides": out,
    }
    reservation = data.get("CapacityReservationSpecification") or {}
    return {
        "template": template,
        "version": version,
        "override": override,
        "instance_type": instance_type,
        "subnet_id": subnet_id,
        "zone": zone,
        "lto": lto,
        "reservation_id": (reservation.get("CapacityReservationTarget") or {}).get(
            "CapacityReservationId"
        ),
        "reservation_preference": reservation.get("CapacityReservationPreference"),
        "market_type": (data.get("InstanceMarketOptions") or {}).get("MarketType"),
        "placement": placement_request(data, override),
        "interfaces": interfaces,
    }


def fleet_error(c, capacity_type, code, message) -> dict:
    return {
        "LaunchTemplateAndOverrides": c["lto"],
        "Lifecycle": capacity_type,
        "ErrorCode": code,
        "ErrorMessage": message,
    }


def launch_reserved(backend, fleet_id, c, capacity_type, count, tags) -> dict:
    """Launches `count` instances of one override into the capacity reservation its
    template targets (or a CreateFleetError, as EC2 answers it, when the reservation is
    unknown, not active, for another instance type or zone or market, or too small);
    each launched instance takes one of its slots."""
    region = backend.region_name
    cr_id = c["reservation_id"]
    block = c["market_type"] == "capacity-block"
    with LOCK:
        record = find_reservation(region, cr_id) if cr_id else None
        if capacity_type == "spot":
            return fleet_error(
                c,
                capacity_type,
                "InvalidParameterCombination",
                "Spot Instances cannot be launched into a capacity reservation",
            )
        if cr_id is None:
            return fleet_error(
                c,
                capacity_type,
                "InvalidParameterValue",
                "A capacity-block launch must target a Capacity Block with "
                "CapacityReservationTarget.CapacityReservationId",
            )
        if record is None:
            return fleet_error(
                c,
                capacity_type,
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{cr_id}' does not exist",
            )
        if record["state"] != "active":
            return fleet_error(
                c,
                capacity_type,
                "InvalidParameterValue",
                f"The capacity reservation {cr_id} is not active (state "
                f"{record['state']}), so it does not match the request",
            )
        if (record["instance_type"], record["availability_zone"]) != (
            c["instance_type"],
            c["zone"],
        ):
            return fleet_error(
                c,
                capacity_type,
                "InvalidParameterValue",
                f"The capacity reservation {cr_id} ({record['instance_type']} in "
                f"{record['availability_zone']}) does not match the requested "
                f"instance type {c['instance_type']} in {c['zone']}",
            )
        if block != (record["reservation_type"] == "capacity-block"):
            return fleet_error(
                c,
                capacity_type,
                "InvalidParameterValue",
                f"The capacity reservation {cr_id} ({record['reservation_type']}) "
                f"does not match the market type {c['market_type'] or 'on-demand'}: "
                "a Capacity Block needs InstanceMarketOptions.MarketType "
                "capacity-block, and only a Capacity Block takes it",
            )
        if record["available"] < count:
            return fleet_error(
                c,
                capacity_type,
                "ReservationCapacityExceeded",
                f"Insufficient capacity in the capacity reservation {cr_id}.",
            )
        outcome = launch(
            backend,
            fleet_id,
            c,
            capacity_type,
            count,
            tags,
            "capacity-block" if block else None,
        )
        if "ErrorCode" in outcome:
            return outcome
        record["available"] -= len(outcome["InstanceIds"])
        preference = c["reservation_preference"] or "capacity-reservations-only"
        for iid in outcome["InstanceIds"]:
            place_in_reservation(backend, iid, cr_id, preference, True)
    return outcome


def launch_open(backend, fleet_id, c, capacity_type, count, tags) -> dict:
    """Launches `count` instances of one override; on-demand ones whose template leaves
    the preference open (absent or "open") run, as on EC2, in the active open
    reservations of their instance type and zone while they have slots (the rest as
    plain on-demand); preference "none" never does; "capacity-reservations-only"
    without a target needs slots for all of them."""
    region = backend.region_name
    preference = c["reservation_preference"]
    if capacity_type == "spot" or preference == "none":
        return launch(backend, fleet_id, c, capacity_type, count, tags)
    with LOCK:
        open_records = [
            r
            for r in STATE.capacity_reservations.get(region, [])
            if r["state"] == "active"
            and r["instance_match_criteria"] == "open"
            and r["reservation_type"] == "default"
            and (r["instance_type"], r["availability_zone"])
            == (c["instance_type"], c["zone"])
        ]
        free = sum(r["available"] for r in open_records)
        if preference == "capacity-reservations-only" and free < count:
            return fleet_error(
                c,
                capacity_type,
                "ReservationCapacityExceeded",
                f"Insufficient capacity in the open capacity reservations of "
                f"{c['instance_type']} in {c['zone']} ({free} available).",
            )
        outcome = launch(backend, fleet_id, c, capacity_type, count, tags)
        if "ErrorCode" in outcome:
            return outcome
        ids = list(outcome["InstanceIds"])
        for record in open_records:
            while ids and record["available"] > 0:
                record["available"] -= 1
                place_in_reservation(
                    backend, ids.pop(0), record["id"], preference or "open", False
                )
    return outcome


def launch(
    backend, fleet_id, c, capacity_type, count, tags, lifecycle: str | None = None
) -> dict:
    """Launches `count` instances of one override; returns a CreateFleetInstance, or a
    CreateFleetError for a launch template naming an unknown instance profile. The
    instances take the security groups of the template's primary network interface
    (else its SecurityGroupIds), its interfaces (19) and the placement group (18)."""
    template, version, lto = c["template"], c["version"], c["lto"]
    instance_type, subnet_id, zone = c["instance_type"], c["subnet_id"], c["zone"]
    image_id = c["override"].get("ImageId")
    data = version.data
    profile = data.get("IamInstanceProfile") or {}
    profile_kwargs = {}
    if profile.get("Name") or profile.get("Arn"):
        try:
            found = filter_iam_instance_profiles(
                ACCOUNT,
                partition="aws",
                iam_instance_profile_arn=profile.get("Arn"),
                iam_instance_profile_name=profile.get("Name"),
            )
        except IAMNotFound:
            found = None
        if found is None:
            what = profile.get("Name") or profile.get("Arn")
            return {
                "LaunchTemplateAndOverrides": lto,
                "Lifecycle": capacity_type,
                "ErrorCode": "InvalidParameterValue",
                "ErrorMessage": (
                    f"Value ({what}) for parameter iamInstanceProfile.name is invalid. "
                    "Invalid IAM Instance Profile name"
                ),
            }
        profile_kwargs = {
            k: v
            for k, v in (("name", profile.get("Name")), ("arn", profile.get("Arn")))
            if v
        }
    instance_tags = dict(tags.get("instance", {}))
    instance_tags["aws:ec2:fleet-id"] = fleet_id
    kwargs = {
        "instance_type": instance_type,
        "is_instance_type_default": False,
        "region_name": backend.region_name,
        "subnet_id": subnet_id,
        "placement": None if subnet_id else zone,
        "key_name": data.get("KeyName"),
        "security_group_ids": instance_group_ids(c),
        "tags": {"instance": instance_tags, "volume": dict(tags.get("volume", {}))},
        "launch_template": {
            "LaunchTemplateId": template.id,
            "Version": str(version.number),
        },
        "metadata_options": data.get("MetadataOptions") or {},
        "fleet_id": fleet_id,
        "lifecycle": "spot" if capacity_type == "spot" else lifecycle,
        "ebs_optimized": bool(data.get("EbsOptimized")),
    }
    if data.get("BlockDeviceMappings"):
        kwargs["block_device_mappings"] = data["BlockDeviceMappings"]
    primary = primary_interface(c["interfaces"]) or {}
    if primary.get("AssociatePublicIpAddress") is not None:
        kwargs["associate_public_ip"] = bool(primary["AssociatePublicIpAddress"])
    reservation = None
    if count > 0:
        reservation = backend.run_instances(
            image_id or data.get("ImageId"),
            count,
            data.get("UserData"),
            list(data.get("SecurityGroups") or []),
            **kwargs,
        )
    ids = []
    for index, instance in enumerate(reservation.instances if reservation else []):
        ids.append(instance.id)
        place_instance(instance, c.get("plan"), index)
        attach_interfaces(backend, instance, c["interfaces"])
        if profile_kwargs:
            backend.associate_iam_instance_profile(
                instance_id=instance.id,
                iam_instance_profile_name=profile_kwargs.get("name"),
                iam_instance_profile_arn=profile_kwargs.get("arn"),
            )
    return {
        "LaunchTemplateAndOverrides": lto,
        "Lifecycle": capacity_type,
        "InstanceIds": ids,
        "InstanceType": instance_type,
        "AvailabilityZone": reservation.instances[0].availability_zone
        if reservation
        else zone,
        "SubnetId": subnet_id,
    }


# --- launch template network interfaces (19) -----------------------------------------

EFA_TYPES = ("efa", "efa-only")


def interfaces_of(data: dict) -> list[dict]:
    """The launch template's NetworkInterfaces, each with integer DeviceIndex and
    NetworkCardIndex (0 when absent)."""
    out = []
    for spec in data.get("NetworkInterfaces") or []:
        spec = dict(spec)
        spec["DeviceIndex"] = int(spec.get("DeviceIndex") or 0)
        spec["NetworkCardIndex"] = int(spec.get("NetworkCardIndex") or 0)
        out.append(spec)
    return out


def primary_interface(interfaces: list[dict]) -> dict | None:
    """The interface at DeviceIndex 0 of NetworkCardIndex 0."""
    return next(
        (n for n in interfaces if n["DeviceIndex"] == 0 and n["NetworkCardIndex"] == 0),
        None,
    )


def instance_group_ids(c: dict) -> list[str]:
    """The instance's security groups: its primary interface's, or, when the template
    has no interfaces, its SecurityGroupIds."""
    if c["interfaces"]:
        return list((primary_interface(c["interfaces"]) or {}).get("Groups") or [])
    return list(c["version"].data.get("SecurityGroupIds") or [])


def check_interfaces(backend, c) -> tuple | None:
    """(code, message) of the CreateFleetError for a template whose network interfaces
    do not fit: with instance-level security groups too, naming an unknown group, or
    against the instance type's NetworkInfo (check_cards)."""
    interfaces = c["interfaces"]
    if not interfaces:
        return None
    data = c["version"].data
    if data.get("SecurityGroupIds") or data.get("SecurityGroups"):
        return (
            "InvalidParameterCombination",
            (
                "Network interfaces and an instance-level security groups may not be "
                "specified on the same request"
            ),
        )
    for spec in interfaces:
        for group_id in spec.get("Groups") or []:
            if backend.get_security_group_from_id(group_id) is None:
                return (
                    "InvalidGroup.NotFound",
                    f"The security group '{group_id}' does not exist",
                )
    if any(n.get("AssociatePublicIpAddress") for n in interfaces) and (
        len(interfaces) > 1
    ):
        return (
            "InvalidParameterCombination",
            (
                "The associatePublicIPAddress parameter cannot be specified when "
                "launching with multiple network interfaces."
            ),
        )
    info = (INSTANCE_TYPES.get(c["instance_type"]) or {}).get("NetworkInfo")
    return check_cards(c["instance_type"], info, interfaces) if info else None


def check_cards(itype: str, info: dict, interfaces: list[dict]) -> tuple | None:
    """The interfaces against NetworkInfo: each card index below MaximumNetworkCards,
    each card's interfaces (and device indexes) below its MaximumNetworkInterfaces, efa
    and efa-only only on cards listing them and no more than
    EfaInfo.MaximumEfaInterfaces, and no IPv4 prefixes or public IP on efa-only ones."""
    cards = {card["NetworkCardIndex"]: card for card in info.get("NetworkCards") or []}
    max_cards = int(info.get("MaximumNetworkCards") or 1)
    max_efa = int((info.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0)
    per_card: collections.Counter = collections.Counter()
    seen: set[tuple[int, int]] = set()
    efa = 0
    for spec in interfaces:
        index, device = spec["NetworkCardIndex"], spec["DeviceIndex"]
        kind = spec.get("InterfaceType") or "interface"
        card = cards.get(index)
        if index >= max_cards or card is None:
            return (
                "InvalidParameterValue",
                (
                    f"Network card index {index} is not valid for instance type "
                    f"{itype}, which has {max_cards} network card(s)."
                ),
            )
        limit = int(card["MaximumNetworkInterfaces"])
        per_card[index] += 1
        if device >= limit or per_card[index] > limit:
            return (
                "InvalidParameterValue",
                (
                    f"Instance type {itype} supports at most {limit} network "
                    f"interfaces (device indexes 0 to {limit - 1}) on network card "
                    f"{index}."
                ),
            )
        if (index, device) in seen:
            return (
                "InvalidParameterValue",
                f"Device index {device} is used twice on network card {index}.",
            )
        seen.add((index, device))
        problem = check_efa(itype, card, spec, kind)
        if problem:
            return problem
        efa += kind in EFA_TYPES
    if efa > max_efa:
        return (
            "InvalidParameterCombination",
            (
                f"Instance type {itype} supports at most {max_efa} EFA interfaces; "
                f"{efa} were requested."
            ),
        )
    return None


def check_efa(itype: str, card: dict, spec: dict, kind: str) -> tuple | None:
    """An efa or efa-only interface on a card that lacks that type; an efa-only one
    that is primary, or asks for IPv4 prefixes or a public IP (it has no IP)."""
    if kind in EFA_TYPES and kind not in card.get("InterfaceTypes", []):
        return (
            "InvalidParameterCombination",
            (
                f"Interface type {kind} is not supported on network card "
                f"{card['NetworkCardIndex']} of instance type {itype}."
            ),
        )
    if kind != "efa-only":
        return None
    if spec["DeviceIndex"] == 0 and spec["NetworkCardIndex"] == 0:
        return (
            "InvalidParameterValue",
            (
                "An efa-only network interface cannot be the primary network interface "
                "(device index 0 on network card 0)."
            ),
        )
    for name in ("Ipv4PrefixCount", "AssociatePublicIpAddress"):
        if spec.get(name) is not None:
            return (
                "InvalidParameterValue",
                (
                    f"The parameter {name} is not supported for efa-only network "
                    "interfaces."
                ),
            )
    return None


def attach_interfaces(backend, instance, interfaces: list[dict]) -> None:
    """The template's interfaces on a launched instance: the primary one (moto's,
    created in its subnet with its security groups) takes the spec's type, prefixes and
    connection tracking; each other one is created in its own SubnetId (else the
    instance's) with its own Groups (else the VPC's default group) and attached. A
    primary interface without Groups has the VPC's default group, and so the instance."""
    for spec in interfaces:
        if spec["DeviceIndex"] == 0 and spec["NetworkCardIndex"] == 0:
            eni = instance.nics[0]
            if spec.get("Description"):
                eni.description = spec["Description"]
        else:
            eni = new_interface(backend, instance, spec)
        dress_interface(instance, eni, spec)
    if interfaces and not instance.security_groups:
        instance.security_groups = list(instance.nics[0]._group_set)


def new_interface(backend, instance, spec: dict):
    """A secondary interface, attached at its device index and card: instance.nics is
    keyed by device index, so those of other cards get keys of their own (1000 * card +
    device index). An efa-only interface has no IP address."""
    subnet = backend.get_subnet(spec.get("SubnetId") or instance.subnet_id)
    efa_only = spec.get("InterfaceType") == "efa-only"
    eni = backend.create_network_interface(
        subnet,
        None if efa_only else subnet.get_available_subnet_ip(instance),
        group_ids=list(spec.get("Groups") or []) or None,
        description=spec.get("Description"),
        delete_on_termination=spec.get("DeleteOnTermination") is True,
    )
    if efa_only:
        eni.private_ip_address = None
        eni.private_ip_addresses = []
        eni.private_dns_name = None
    card, device = spec["NetworkCardIndex"], spec["DeviceIndex"]
    instance.nics[device if card == 0 else 1000 * card + device] = eni
    eni.instance = instance
    eni.attachment_id = random_eni_attach_id()
    eni.attach_time = utcnow()
    eni.status = "in-use"
    eni.device_index = device
    return eni


def dress_interface(instance, eni, spec: dict) -> None:
    """What DescribeInstances shows of the spec on the interface: InterfaceType,
    Attachment.NetworkCardIndex, Ipv4PrefixCount /28 prefixes, the connection tracking
    asked for, and its own groups only."""
    eni.peer_own_groups = True
    eni.network_card_index = spec["NetworkCardIndex"]
    eni.interface_type = spec.get("InterfaceType") or "interface"
    tracking = spec.get("ConnectionTrackingSpecification")
    if tracking:
        eni.connection_tracking_configuration = dict(tracking)
    count = int(spec.get("Ipv4PrefixCount") or 0)
    if count:
        prefixes = allocate_prefixes(eni.subnet, count, instance)
        eni.ipv4_prefixes = [{"Ipv4Prefix": p} for p in prefixes]


def allocate_prefixes(subnet, count: int, instance) -> list[str]:
    """`count` /28 prefixes of the subnet, from its top down, none of whose addresses
    moto has handed out (nor the network and broadcast ones); their addresses are held
    for the instance until it terminates (release_prefixes)."""
    out = []
    blocks = (
        list(subnet.cidr.subnets(new_prefix=28)) if subnet.cidr.prefixlen <= 28 else []
    )
    for block in reversed(blocks):
        addresses = [str(a) for a in block]
        if (
            subnet.cidr.broadcast_address in block
            or subnet.cidr.network_address in block
        ):
            continue
        if any(a in subnet._subnet_ips for a in addresses):
            continue
        for a in addresses:
            subnet._subnet_ips[a] = instance
            subnet._unused_ips.discard(a)
        out.append(str(block))
        STATE.instance_prefixes.setdefault(instance.id, []).append((subnet, str(block)))
        if len(out) == count:
            return out
    raise EC2ClientError(
        "InsufficientCidrBlocks",
        f"The specified subnet {subnet.id} does not have enough free cidr blocks to "
        "satisfy the request.",
    )


def release_prefixes(instance_id: str) -> None:
    """A terminated instance's prefixes are free again."""
    for subnet, prefix in STATE.instance_prefixes.pop(instance_id, []):
        for address in ipaddress.ip_network(prefix):
            subnet._subnet_ips.pop(str(address), None)


ORIGINAL_ENI_GROUP_SET = NetworkInterface.group_set
ORIGINAL_ENI_ATTACHMENT = NetworkInterface.attachment


def eni_group_set(self):
    """moto shows every attached interface with its instance's groups too; one made
    from a template's interfaces (19) shows its own, as EC2 does."""
    if getattr(self, "peer_own_groups", False):
        return self._group_set
    return ORIGINAL_ENI_GROUP_SET.fget(self)


def eni_attachment(self):
    """moto's attachment is always on network card 0; this one is on the interface's."""
    attachment = ORIGINAL_ENI_ATTACHMENT.fget(self)
    if attachment is not None:
        attachment.network_card_index = getattr(self, "network_card_index", 0)
    return attachment


NetworkInterface.group_set = property(eni_group_set)
NetworkInterface.attachment = property(eni_attachment)
ec2_utils.filter_dict_attribute_mapping["placement-group-name"] = "placement.group_name"


# --- other fixes (e) ---------------------------------------------------------------------


def page_bounds(self, action: str, low: int, high: int, default: int) -> tuple[int, int]:
    """(start, size) of the page asked for: NextToken is the offset as a decimal string;
    MaxResults outside [low, high] is InvalidParameterValue, as in EC2."""
    raw = self._get_param("MaxResults")
    size = default if raw in (None, "") else int(raw)
    if not low <= size <= high:
        raise EC2ClientError(
            "InvalidParameterValue",
            f"{action}: MaxResults must be between {low} and {high}, got {size}",
        )
    token = self._get_param("NextToken") or "0"
    if not token.isdigit():
        raise EC2ClientError("InvalidParameterValue", f"Invalid NextToken: {token}")
    return int(token), size


def paged(rows: list, start: int, size: int, key: str) -> dict:
    result = {key: rows[start : start + size]}
    if start + size < len(rows):
        result["NextToken"] = str(start + size)
    return result


def describe_instance_types(self) -> ActionResult:
    start, size = page_bounds(self, "DescribeInstanceTypes", 5, 100, 100)
    types = self.ec2_backend.describe_instance_types(
        self._get_param("InstanceTypes", []), self._filters_from_querystring()
    )
    return ActionResult(paged(list(types), start, size, "InstanceTypes"))


def wildcard(values: list[str]) -> re.Pattern:
    """An EC2 filter's values as one regex: * and ? are wildcards, backslash escapes."""
    parts = []
    for value in values:
        out, i = [], 0
        while i < len(value):
            c = value[i]
            if c == "\\" and i + 1 < len(value):
                out.append(re.escape(value[i + 1]))
                i += 2
                continue
            out.append(".*" if c == "*" else "." if c == "?" else re.escape(c))
            i += 1
        parts.append("".join(out))
    return re.compile("^(?:" + "|".join(parts) + ")$", re.DOTALL)


def describe_instance_type_offerings(self) -> ActionResult:
    start, size = page_bounds(self, "DescribeInstanceTypeOfferings", 5, 1000, 1000)
    location_type = self._get_param("LocationType") or "region"
    offerings = INSTANCE_TYPE_OFFERINGS.get(location_type, {}).get(self.region, [])
    for name, values in self._filters_from_querystring().items():
        if name not in ("location", "instance-type"):
            raise EC2ClientError(
                "InvalidParameterValue", f"The filter '{name}' is invalid"
            )
        field = "Location" if name == "location" else "InstanceType"
        pattern = wildcard(values)
        offerings = [o for o in offerings if pattern.match(o[field])]
    rows = [
        {
            "InstanceType": o["InstanceType"],
            "LocationType": location_type,
            "Location": o["Location"],
        }
        for o in offerings
    ]
    return ActionResult(paged(rows, start, size, "InstanceTypeOfferings"))


ORIGINAL_TERMINATE = EC2Response.terminate_instances


def terminate_instances(self) -> ActionResult:
    ids = self._get_param("InstanceIds", []) or []
    already = set()
    for instance_id in ids:
        instance = self.ec2_backend.get_instance_by_id(instance_id)
        if instance is not None and instance.state == "terminated":
            already.add(instance_id)
    result = ORIGINAL_TERMINATE(self)
    with LOCK:
        for item in result.result["TerminatingInstances"]:
            if item["InstanceId"] in already:
                item["CurrentState"] = {"Code": 48, "Name": "terminated"}
            else:
                release_reservation_slot(item["InstanceId"])
                release_prefixes(item["InstanceId"])
    return result


ORIGINAL_CREATE_LAUNCH_TEMPLATE = EC2Response.create_launch_template


def create_launch_template(self) -> ActionResult:
    sent = self._get_param("LaunchTemplateData", {}) or {}
    sent_specs = list(sent.get("TagSpecifications") or [])
    result = ORIGINAL_CREATE_LAUNCH_TEMPLATE(self)
    template = self.ec2_backend.get_launch_template(
        result.result["LaunchTemplate"]["LaunchTemplateId"]
    )
    for version in template.versions:
        if sent_specs:
            version.data["TagSpecifications"] = sent_specs
        else:
            version.data.pop("TagSpecifications", None)
        if version.data.get("UserData") is None:
            version.data.pop("UserData", None)
    return result


ORIGINAL_CREATE_TAGS = EC2Response.create_tags


def create_tags(self) -> ActionResult:
    for resource_id in self._get_param("Resources", []) or []:
        if resource_id.startswith("i-") and (
            self.ec2_backend.get_instance_by_id(resource_id) is None
        ):
            raise InvalidInstanceIdError(resource_id)
    return ORIGINAL_CREATE_TAGS(self)


ORIGINAL_DELETE_LAUNCH_TEMPLATE = EC2Response.delete_launch_template


def delete_launch_template(self) -> ActionResult:
    name = self._get_param("LaunchTemplateName")
    template_id = self._get_param("LaunchTemplateId")
    if name:
        self.ec2_backend.get_launch_template_by_name(name)
    elif template_id:
        self.ec2_backend.get_launch_template(template_id)
    return ORIGINAL_DELETE_LAUNCH_TEMPLATE(self)


EC2Response.create_fleet = create_fleet
EC2Response.delete_launch_template = delete_launch_template
EC2Response.create_tags = create_tags
EC2Response.describe_spot_price_history = describe_spot_price_history
EC2Response.describe_instance_types = describe_instance_types
EC2Response.describe_instance_type_offerings = describe_instance_type_offerings
EC2Response.terminate_instances = terminate_instances
EC2Response.create_launch_template = create_launch_template
EC2Response.describe_capacity_reservations = describe_capacity_reservations
EC2Response.create_placement_group = create_placement_group
EC2Response.describe_placement_groups = describe_placement_groups
EC2Response.delete_placement_group = delete_placement_group


# --- the WSGI layer: request log, throttling, test controls -----------------------------


def read_body(environ) -> bytes:
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    body = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    return body


def scope(environ) -> tuple[str | None, str | None]:
    """(region, service) from the SigV4 credential scope."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    try:
        credential = auth.split("Credential=", 1)[1].split(",", 1)[0]
        _, _, region, service, _ = credential.split("/")
        return region, service.lower()
    except (IndexError, ValueError):
        return None, None


def action_of(environ, body: bytes) -> str | None:
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return target.rsplit(".", 1)[-1]
    fields = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
    if "Action" not in fields and body:
        fields = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
    values = fields.get("Action")
    return values[0] if values else None


def throttled_response(service: str):
    request_id = str(uuid.uuid4())
    if service == "ssm":
        body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"})
        return (
            "400 Bad Request",
            [
                ("Content-Type", "application/x-amz-json-1.1"),
                ("x-amzn-RequestId", request_id),
            ],
            body,
        )
    if service == "sqs":
        # SQS's JSON protocol (what the SDKs speak): a throttling error the SDK retries.
        body = json.dumps(
            {"__type": "com.amazonaws.sqs#RequestThrottled", "message": "Rate exceeded"}
        )
        return (
            "400 Bad Request",
            [
                ("Content-Type", "application/x-amz-json-1.0"),
                ("x-amzn-RequestId", request_id),
                ("x-amzn-query-error", "RequestThrottled;Sender"),
            ],
            body,
        )
    if service == "iam":
        body = (
            '<ErrorResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/">'
            "<Error><Type>Sender</Type><Code>Throttling</Code>"
            "<Message>Rate exceeded</Message></Error>"
            f"<RequestId>{request_id}</RequestId></ErrorResponse>"
        )
        return "400 Bad Request", [("Content-Type", "text/xml")], body
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        "<Response><Errors><Error><Code>RequestLimitExceeded</Code>"
        "<Message>Request limit exceeded.</Message></Error></Errors>"
        f"<RequestID>{request_id}</RequestID></Response>"
    )
    return "503 Service Unavailable", [("Content-Type", "text/xml")], body


def price_item(region: str, name: str, price: float) -> str:
    metal = name.endswith(".metal") or ".metal-" in name
    sku = hashlib.sha256(f"{region}/{name}".encode()).hexdigest()[:16].upper()
    term = f"{sku}.JRTCKXETXF"
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance (bare metal)"
                if metal
                else "Compute Instance",
                "sku": sku,
                "attributes": {
                    "instanceType": name,
                    "regionCode": region,
                    "tenancy": "Dedicated" if metal else "Shared",
                    "operatingSystem": "Linux",
                    "preInstalledSw": "NA",
                    "capacitystatus": "Used",
                    "marketoption": "OnDemand",
                    "servicecode": "AmazonEC2",
                },
            },
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    term: {
                        "priceDimensions": {
                            f"{term}.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "pricePerUnit": {"USD": f"{price:.10f}"},
                            }
                        },
                        "sku": sku,
                    }
                }
            },
        }
    )


def get_products(body: bytes) -> tuple[str, list, str]:
    """14: GetProducts over the region tables."""
    request = json.loads(body or b"{}")
    if request.get("ServiceCode") != "AmazonEC2":
        answer = {"FormatVersion": "aws_v1", "PriceList": []}
        return "200 OK", [("Content-Type", "application/x-amz-json-1.1")], json.dumps(answer)
    wanted = {
        f["Field"]: f["Value"]
        for f in request.get("Filters", [])
        if f.get("Type", "TERM_MATCH") == "TERM_MATCH"
    }
    region = wanted.pop("regionCode", None)
    wanted.pop("serviceCode", None)
    with LOCK:
        table = dict(STATE.pricing.get(region or "", {}))
    items = []
    for name in sorted(table):
        item = price_item(region, name, table[name])
        product = json.loads(item)["product"]
        attrs = dict(product["attributes"], productFamily=product["productFamily"])
        if all(attrs.get(k) == v for k, v in wanted.items()):
            items.append(item)
    size = min(int(request.get("MaxResults") or 100), 100)
    start = int(request.get("NextToken") or 0)
    answer = {"FormatVersion": "aws_v1", "PriceList": items[start : start + size]}
    if start + size < len(items):
        answer["NextToken"] = str(start + size)
    return "200 OK", [("Content-Type", "application/x-amz-json-1.1")], json.dumps(answer)


def parse_ice_pair(p: dict) -> dict:
    """One pair of a `POST /_peer/ice` body (10); ValueError (the control's 400) for a
    bad field. "placement_group" (a group id) and "partition" (1-7, only with a group)
    are null when absent."""
    ct = p.get("capacity_type")
    if ct not in (None, "spot", "on-demand"):
        raise ValueError(f"capacity_type {ct!r}")
    group = p.get("placement_group")
    if group is not None and not isinstance(group, str):
        raise ValueError(f"placement_group {group!r} is not a group id")
    partition = p.get("partition")
    if partition is not None:
        if group is None:
            raise ValueError("partition needs placement_group")
        if not isinstance(partition, int) or isinstance(partition, bool):
            raise ValueError(f"partition {partition!r} is not a number")
        if not 1 <= partition <= PG_MAX_PARTITIONS:
            raise ValueError(f"partition {partition} is not 1-{PG_MAX_PARTITIONS}")
    return {
        "instance_type": p["instance_type"],
        "zone": p["zone"],
        "capacity_type": ct,
        "placement_group": group,
        "partition": partition,
    }


class Peer:
    def __init__(self, app) -> None:
        self.app = app

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_peer/"):
            return self.control(environ, start_response, path[len("/_peer/") :])
        body = read_body(environ)
        region, service = scope(environ)
        if region and service in ("ec2", "ssm"):
            seed_region(region)
        action = action_of(environ, body)
        throttled = False
        with LOCK:
            left = STATE.throttles.get(action or "", 0)
            if left > 0:
                STATE.throttles[action] = left - 1
                throttled = True
            STATE.requests.append(
                {"service": service, "action": action, "throttled": throttled}
            )
            del STATE.requests[:-5000]
        if throttled:
            status, headers, text = throttled_response(
                "ssm" if service == "pricing" else service or "ec2"
            )
            data = text.encode()
            start_response(status, headers + [("Content-Length", str(len(data)))])
            return [data]
        if service == "pricing" and action == "GetProducts":
            status, headers, text = get_products(body)
            data = text.encode()
            start_response(status, headers + [("Content-Length", str(len(data)))])
            return [data]
        return self.app(environ, start_response)

    def control(self, environ, start_response, name):
        method = environ.get("REQUEST_METHOD", "GET")
        raw = read_body(environ)
        try:
            body = json.loads(raw) if raw.strip() else {}
            status, answer = self.handle(method, name, body)
        except Exception as e:  # noqa: BLE001 - any bad body is the caller's error
            status, answer = 400, {"error": f"{type(e).__name__}: {e}"}
        data = json.dumps(answer).encode()
        start_response(
            f"{status} {'OK' if status == 200 else 'Error'}",
            [("Content-Type", "application/json"), ("Content-Length", str(len(data)))],
        )
        return [data]

    def handle(self, method, name, body):
        region = (
            body.get("region", "us-east-1") if isinstance(body, dict) else "us-east-1"
        )
        seed_region(region)
        with LOCK:
            if name == "ice" and method == "GET":
                return 200, {"pairs": STATE.ice}
            if name == "ice" and method == "POST":
                STATE.ice = [parse_ice_pair(p) for p in body["pairs"]]
                return 200, {"pairs": STATE.ice}
            if name == "ice" and method == "DELETE":
                STATE.ice = []
                return 200, {"pairs": STATE.ice}
            if name == "throttle" and method == "GET":
                return 200, {"throttles": STATE.throttles}
            if name == "throttle" and method == "POST":
                STATE.throttles[body["action"]] = int(body.get("count", 1))
                return 200, {"throttles": STATE.throttles}
            if name == "throttle" and method == "DELETE":
                STATE.throttles = {}
                return 200, {"throttles": STATE.throttles}
            if name == "requests" and method == "GET":
                return 200, list(STATE.requests)
            if name == "requests" and method == "DELETE":
                n = len(STATE.requests)
                STATE.requests = []
                return 200, {"cleared": n}
            if name == "fleets" and method == "GET":
                return 200, list(STATE.fleets)
            if name == "fleets" and method == "DELETE":
                n = len(STATE.fleets)
                STATE.fleets = []
                return 200, {"cleared": n}
            if name == "ssm" and method == "POST":
                version = set_ssm(region, body["name"], body["value"])
                return 200, {
                    "name": body["name"],
                    "value": body["value"],
                    "version": version,
                }
            if name == "pricing" and method == "POST":
                prices = {k: float(v) for k, v in body["prices"].items()}
                STATE.pricing[body["region"]] = prices
                return 200, {"region": body["region"], "count": len(prices)}
            if name == "capacity-reservations" and method == "GET":
                records = STATE.capacity_reservations.get(region, [])
                return 200, {
                    "reservations": [reservation_view(region, r) for r in records]
                }
            if name == "capacity-reservations" and method == "POST":
                records = [parse_reservation(region, r) for r in body["reservations"]]
                ids = [r["id"] for r in records]
                if len(set(ids)) != len(ids):
                    raise ValueError(f"duplicate ids in {ids}")
                STATE.capacity_reservations[region] = records
                return 200, {
                    "reservations": [reservation_view(region, r) for r in records]
                }
            if name == "capacity-reservations" and method == "DELETE":
                STATE.capacity_reservations = {}
                STATE.reserved_instances = {}
                return 200, {"reservations": []}
            if name == "capacity-reservations/expire" and method == "POST":
                return 200, expire_reservation(region, body["id"])
            if name == "placement-groups/state" and method == "POST":
                return 200, set_placement_group_state(
                    region, body["name"], body["state"]
                )
            if name == "ami" and method == "POST":
                ami_id = register_ami(
                    region,
                    body["name"],
                    body.get("architecture", "x86_64"),
                    body.get("creation_date"),
                    body.get("tags"),
                    body.get("owner") or EKS_OWNER,
                )
                return 200, {"image_id": ami_id}
        return 404, {"error": f"no control {method} /_peer/{name}"}


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    seed_region("us-east-1")
    app = Peer(DomainDispatcherApplication(create_backend_app))
    server = make_server(
        "127.0.0.1", port, app, threaded=True, request_handler=MotoRequestHandler
    )
    print(f"listening on {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
