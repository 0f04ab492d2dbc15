//! Where a pod can go: an existing node (or in-flight NodeClaim) with room, or a NodeClaim
//! planned in this round whose instance-type options still fit everything added to it.
//! Mirrors upstream `ExistingNode.Add` and `NodeClaim.Add` with their failure reasons.

use std::sync::Arc;

use crate::api::labels;
use crate::api::nodeclaim::Taint;
use crate::engine::pod::HostPort;
use crate::engine::requirements::{Requirements, allow_no_undefined, allow_well_known_labels};
use crate::engine::reservation::Holds;
use crate::engine::resources::{Resources, format_milli};

use super::preferences::WorkPod;
use super::template::{Template, tolerates};
use super::topology::Topology;

/// Room on a node that already exists (or is launching).
#[derive(Clone, Debug)]
pub struct ExistingSlot {
    pub name: String,
    /// The node's labels as requirements, shared with the node's earlier simulators
    /// while its labels stay the same (see `simulator::node_requirements`).
    pub requirements: Arc<Requirements>,
    pub taints: Vec<Taint>,
    /// Allocatable minus what bound and nominated pods request.
    pub available: Resources,
    pub host_ports: Vec<HostPort>,
    pub initialized: bool,
    /// Pods (indices into the solve's pod list) placed here this round.
    pub pods: Vec<usize>,
}

impl ExistingSlot {
    /// Places the pod if it fits every constraint and says whether it did. (Why a pod
    /// does not fit one particular existing node is never reported: the pod's error comes
    /// from the NodePools, as upstream's does, so nothing is formatted here.)
    /// `inverse` lists the anti-affinity groups of other pods that select this pod
    /// ([`Topology::inverse_selecting`]), computed once per placement attempt.
    pub fn try_add(
        &mut self,
        topology: &mut Topology,
        w: &WorkPod,
        idx: usize,
        inverse: &[usize],
    ) -> bool {
        let pod = &w.pod;
        let topo = w.has_topology || !inverse.is_empty();
        if !pod.requests.fits_in(&self.available) {
            return false;
        }
        if !admitted(w, &self.taints, &self.host_ports) {
            return false;
        }
        if self
            .requirements
            .compatible(&w.requirements, &allow_no_undefined)
            .is_err()
        {
            return false;
        }
        if topo {
            if !topology.may_admit(pod, &w.strict, &self.requirements, inverse) {
                return false;
            }
            let Ok(topo) = topology.requirements_for(pod, &w.strict, &self.requirements, inverse)
            else {
                return false;
            };
            if self
                .requirements
                .compatible(&topo, &allow_no_undefined)
                .is_err()
            {
                return false;
            }
        }
        self.available.sub(&pod.requests);
        self.host_ports.extend(pod.host_ports.iter().cloned());
        self.pods.push(idx);
        topology.record(pod, &self.requirements, &self.taints);
        true
    }
}

/// A NodeClaim this round will create.
#[derive(Clone, Debug)]
pub struct PlannedClaim {
    /// Index of the NodePool template.
    pub template: usize,
    /// Placeholder hostname (a topology domain until the node exists).
    pub hostname: String,
    pub requirements: Requirements,
    /// Indices into the template's options that still fit.
    pub options: Vec<u32>,
    /// DaemonSet overhead plus every pod added.
    pub requests: Resources,
    /// Element-wise max over the options of (allocatable - requests): a pod that does not
    /// fit in this cannot fit any option, so it is rejected without a scan.
    pub headroom: Resources,
    pub pods: Vec<usize>,
    pub host_ports: Vec<HostPort>,
    /// The capacity reservations it holds (see [`Holds`]).
    pub reserved: Vec<String>,
}

impl PlannedClaim {
    /// A claim with every option of the template that respects the limits.
    pub fn new(
        template_idx: usize,
        t: &Template,
        hostname: String,
        options: Vec<u32>,
    ) -> PlannedClaim {
        let mut requirements = t.requirements.clone();
        requirements.add(crate::engine::requirements::Requirement::in_values(
            labels::HOSTNAME,
            [hostname.clone()],
        ));
        let mut c = PlannedClaim {
            template: template_idx,
            hostname,
            requirements,
            options,
            requests: t.daemon_overhead.clone(),
            headroom: Resources::default(),
            pods: Vec::new(),
            host_ports: Vec::new(),
            reserved: Vec::new(),
        };
        let mut largest = Resources::default();
        for &i in &c.options {
            largest.max(&t.options[i as usize].allocatable);
        }
        c.set_headroom(&largest);
        #[cfg(test)]
        c.check_headroom(t);
        c
    }

    /// Sets the headroom from the element-wise largest allocatable of the options (as
    /// [`Resources::max`] folds it from zero): as requests are the same for every
    /// option, the largest room left is the largest allocatable less the requests, never
    /// below zero. Folding each option's own room (a copy per option, at every pod added)
    /// was a quarter of a 1,000-pod solve.
    fn set_headroom(&mut self, largest: &Resources) {
        let mut h = largest.clone();
        h.sub(&self.requests);
        h.max(&Resources::default());
        h.extended.retain(|(_, v)| *v > 0);
        self.headroom = h;
    }

    /// Unit-test builds: the headroom is its definition, the element-wise max over the
    /// options of (allocatable - requests), folded from zero.
    #[cfg(test)]
    fn check_headroom(&self, t: &Template) {
        let mut h = Resources::default();
        for &i in &self.options {
            let mut free = t.options[i as usize].allocatable.clone();
            free.sub(&self.requests);
            h.max(&free);
        }
        assert_eq!(self.headroom, h, "headroom");
    }

    /// Adds the pod if some option still satisfies everything; upstream `NodeClaim.Add`.
    /// `inverse` as for [`ExistingSlot::try_add`]. With `explain` false the error is
    /// empty: callers that only try claims in turn skip the formatting. `holds` counts
    /// the capacity reservations the solve's claims hold: a claim keeps (or takes) one
    /// unit of each it could still launch into.
    #[allow(clippy::too_many_arguments)]
    pub fn try_add(
        &mut self,
        t: &Template,
        holds: &mut Holds,
        topology: &mut Topology,
        w: &WorkPod,
        idx: usize,
        inverse: &[usize],
        explain: bool,
    ) -> Result<(), String> {
        let pod = &w.pod;
        let topo = w.has_topology || !inverse.is_empty();
        let quiet = |e: &dyn std::fmt::Display| {
            if explain {
                e.to_string()
            } else {
                String::new()
            }
        };
        if !pod.requests.fits_in(&self.headroom) {
            if !explain {
                return Err(String::new());
            }
            let (name, need, have) = pod
                .requests
                .first_shortfall(&self.headroom)
                .unwrap_or_else(|| ("cpu".into(), 0, 0));
            return Err(format!(
                "no instance type has enough resources: {name} needs {} more, at most {} free",
                format_milli(&name, need),
                format_milli(&name, have.max(0))
            ));
        }
        if !explain && !admitted(w, &t.taints, &self.host_ports) {
            return Err(String::new());
        }
        admits(w, &t.taints, &self.host_ports)?;
        let mut reqs = None;
        if !w.requirements.is_empty() || topo {
            // Merge only when the pod narrows something: most pods add nothing, and the
            // clone would dominate the solve.
            let merged;
            let base = if w.requirements.is_empty() {
                &self.requirements
            } else {
                self.requirements
                    .compatible(&w.requirements, &allow_well_known_labels)
                    .map_err(|e| {
                        if explain {
                            e.describe(&format!("nodepool {:?}", t.nodepool))
                                .to_string()
                        } else {
                            String::new()
                        }
                    })?;
                let mut r = self.requirements.clone();
                r.add_all(&w.requirements);
                merged = r;
                &merged
            };
            let topo_reqs = if topo {
                let tr = topology
                    .requirements_for(pod, &w.strict, base, inverse)
                    .map_err(|e| quiet(&e))?;
                base.compatible(&tr, &allow_well_known_labels)
                    .map_err(|e| quiet(&e))?;
                Some(tr)
            } else {
                None
            };
            let implied = topo_reqs.as_ref().is_none_or(|tr| implies(base, tr));
            if !std::ptr::eq(base, &self.requirements) || !implied {
                let mut r = base.clone();
                if let Some(tr) = &topo_reqs {
                    r.add_all(tr);
                }
                if r != self.requirements {
                    reqs = Some(r);
                }
            }
        }
        let mut requests = self.requests.clone();
        requests.add(&pod.requests);
        let req_ref = reqs.as_ref().unwrap_or(&self.requirements);
        let mut flags = FilterFlags::default();
        // The largest allocatable of the options kept, for the headroom.
        let mut largest = Resources::default();
        let remaining: Vec<u32> = self
            .options
            .iter()
            .copied()
            .filter(|&i| {
                let o = &t.options[i as usize];
                let fits = requests.fits_in(&o.allocatable);
                let keep = if reqs.is_none() {
                    flags.fits |= fits;
                    fits
                } else {
                    let compat = o.requirements.intersects(req_ref).is_ok();
                    let offering = compat && o.has_offering(req_ref);
                    flags.record(compat, fits, offering);
                    compat && fits && offering
                };
                if keep {
                    largest.max(&o.allocatable);
                }
                keep
            })
            .collect();
        if remaining.is_empty() {
            if !explain {
                return Err(String::new());
            }
            return Err(format!(
                "no instance type satisfied resources {} and requirements {} ({})",
                requests,
                display_without_hostname(req_ref),
                flags.reason(reqs.is_none())
            ));
        }
        if t.min_values_strict && req_ref.has_min_values() {
            let labels: Vec<&Requirements> = remaining
                .iter()
                .map(|&i| &t.options[i as usize].requirements)
                .collect();
            if let Err(short) = req_ref.satisfies_min_values(&labels) {
                let msg: Vec<String> = short.iter().map(ToString::to_string).collect();
                return Err(format!("minValues not met: {}", msg.join("; ")));
            }
        }
        let hold = if holds.is_empty() {
            None
        } else {
            let options = remaining.iter().map(|&i| &*t.options[i as usize].it);
            match holds.to_hold(&self.hostname, options, req_ref, !self.reserved.is_empty()) {
                Ok(ids) => Some(ids),
                Err(e) => {
                    return Err(if explain {
                        e.to_string()
                    } else {
                        String::new()
                    });
                }
            }
        };
        if let Some(ids) = hold {
            holds.hold(&self.hostname, &ids);
            self.reserved = ids;
        }
        self.options = remaining;
        self.requests = requests;
        if let Some(r) = reqs {
            self.requirements = r;
        }
        self.set_headroom(&largest);
        #[cfg(test)]
        self.check_headroom(t);
        self.pods.push(idx);
        self.host_ports.extend(pod.host_ports.iter().cloned());
        topology.record(pod, &self.requirements, &t.taints);
        Ok(())
    }
}

/// [`admits`] without the message.
fn admitted(w: &WorkPod, taints: &[Taint], used_ports: &[HostPort]) -> bool {
    super::template::tolerated(&w.pod.tolerations, taints, w.tolerate_prefer)
        && !w
            .pod
            .host_ports
            .iter()
            .any(|p| used_ports.iter().any(|u| u.conflicts(p)))
}

/// The checks every destination shares: the node's taints are tolerated and none of the
/// pod's host ports is already taken there.
fn admits(w: &WorkPod, taints: &[Taint], used_ports: &[HostPort]) -> Result<(), String> {
    tolerates(&w.pod.tolerations, taints, w.tolerate_prefer)?;
    match w
        .pod
        .host_ports
        .iter()
        .find(|p| used_ports.iter().any(|u| u.conflicts(p)))
    {
        Some(hp) => Err(format!("host port {} in use", hp.port)),
        None => Ok(()),
    }
}

/// True when every requirement of `extra` is already implied by `base` (base allows only
/// values extra allows), so adding it would change nothing.
fn implies(base: &Requirements, extra: &Requirements) -> bool {
    extra.iter().all(|e| {
        base.get(e.key()).is_some_and(|b| {
            !b.is_complement() && !b.values().is_empty() && b.values().iter().all(|v| e.has(v))
        })
    })
}

fn display_without_hostname(r: &Requirements) -> String {
    let mut r = r.clone();
    r.remove(labels::HOSTNAME);
    r.remove(labels::NODEPOOL);
    r.to_string()
}

/// Which criteria some instance type met, to say which one excluded all of them
/// (upstream `filterResults.FailureReason`).
#[derive(Default)]
struct FilterFlags {
    compat: bool,
    fits: bool,
    offering: bool,
}

impl FilterFlags {
    fn record(&mut self, compat: bool, fits: bool, offering: bool) {
        self.compat |= compat;
        self.fits |= fits;
        self.offering |= offering;
    }

    fn reason(&self, only_fit_checked: bool) -> &'static str {
        if only_fit_checked || (self.compat && !self.fits) {
            return "no instance type has enough resources";
        }
        match (self.compat, self.fits, self.offering) {
            (false, false, _) => {
                "no instance type met the scheduling requirements or had enough resources"
            }
            (false, true, _) => "no instance type met all requirements",
            (true, true, false) => {
                "no instance type which met the scheduling requirements and had enough resources had a required offering"
            }
            _ => "no instance type met the requirements/resources/offering tuple",
        }
    }
}
