//! A pod as the scheduler works on it: its requirements with preferences treated as
//! requirements, and the relaxation that drops one preference at a time when the pod does
//! not fit. Mirrors upstream `scheduling/preferences.go`, in its order: required node
//! affinity OR-terms, preferred pod affinity, preferred pod anti-affinity, preferred node
//! affinity, ScheduleAnyway spreads, then tolerating PreferNoSchedule taints.

use std::borrow::Cow;

use crate::engine::pod::Pod;
use crate::engine::requirements::{Requirements, pod_requirements, strict_pod_requirements};
use crate::engine::scheduling::PreferencePolicy;

/// The working copy of one pod.
#[derive(Clone, Debug)]
pub struct WorkPod<'a> {
    pub pod: Cow<'a, Pod>,
    /// nodeSelector + first required term + heaviest preferred term.
    pub requirements: Requirements,
    /// nodeSelector + first required term (what topology domains may use).
    pub strict: Requirements,
    /// PreferNoSchedule taints tolerated (the last relaxation).
    pub tolerate_prefer: bool,
    /// Whether the pod takes part in any topology group.
    pub has_topology: bool,
}

impl<'a> WorkPod<'a> {
    /// The pod as the scheduler starts on it. Under [`PreferencePolicy::Ignore`] its
    /// preferences are gone before the first try (upstream builds its pod data with
    /// strict requirements and skips ScheduleAnyway spreads, `scheduler.go` and
    /// `topology.go`), so a pod with nothing but preferences is never relaxed.
    pub fn new(pod: &'a Pod, policy: PreferencePolicy) -> Result<WorkPod<'a>, String> {
        let pod = match policy {
            PreferencePolicy::Ignore if has_preferences(pod) => {
                Cow::Owned(without_preferences(pod))
            }
            _ => Cow::Borrowed(pod),
        };
        let mut w = WorkPod {
            pod,
            requirements: Requirements::new(),
            strict: Requirements::new(),
            tolerate_prefer: false,
            has_topology: false,
        };
        w.refresh()?;
        Ok(w)
    }

    fn refresh(&mut self) -> Result<(), String> {
        let p = &self.pod;
        self.requirements = pod_requirements(&p.node_selector, p.node_affinity.as_ref())
            .map_err(|e| e.to_string())?;
        self.strict = strict_pod_requirements(&p.node_selector, p.node_affinity.as_ref())
            .map_err(|e| e.to_string())?;
        self.has_topology = !(p.spread.is_empty()
            && p.affinity.is_empty()
            && p.preferred_affinity.is_empty()
            && p.anti_affinity.is_empty()
            && p.preferred_anti_affinity.is_empty());
        Ok(())
    }

    /// Drops the next preference; returns what was relaxed, or None when nothing is left.
    /// `prefer_no_schedule_present` says whether any pool has a PreferNoSchedule taint
    /// (upstream only adds that relaxation then).
    pub fn relax(&mut self, prefer_no_schedule_present: bool) -> Option<&'static str> {
        let pod = self.pod.to_mut();
        let relaxed = if let Some(na) = pod.node_affinity.as_mut()
            && let Some(req) = na
                .required_during_scheduling_ignored_during_execution
                .as_mut()
            && req.node_selector_terms.len() > 1
        {
            req.node_selector_terms.remove(0);
            Some("required node affinity term")
        } else if remove_heaviest(&mut pod.preferred_affinity) {
            Some("preferred pod affinity")
        } else if remove_heaviest(&mut pod.preferred_anti_affinity) {
            Some("preferred pod anti-affinity")
        } else if let Some(na) = pod.node_affinity.as_mut()
            && let Some(pref) = na
                .preferred_during_scheduling_ignored_during_execution
                .as_mut()
            && !pref.is_empty()
        {
            let heaviest = crate::engine::requirements::heaviest_preference(pref).unwrap_or(0);
            pref.remove(heaviest);
            Some("preferred node affinity")
        } else if let Some(i) = pod.spread.iter().position(|s| !s.hard) {
            pod.spread.remove(i);
            Some("ScheduleAnyway topology spread")
        } else if prefer_no_schedule_present && !self.tolerate_prefer {
            self.tolerate_prefer = true;
            Some("PreferNoSchedule taints")
        } else {
            None
        };
        if relaxed.is_some() {
            // The pod parsed before, and relaxation only removes terms.
            let _ = self.refresh();
        }
        relaxed
    }
}

/// Whether a pod prefers anything: preferred pod (anti-)affinity, preferred node
/// affinity or a ScheduleAnyway spread.
fn has_preferences(p: &Pod) -> bool {
    !p.preferred_affinity.is_empty()
        || !p.preferred_anti_affinity.is_empty()
        || p.spread.iter().any(|s| !s.hard)
        || p.node_affinity.as_ref().is_some_and(|na| {
            na.preferred_during_scheduling_ignored_during_execution
                .as_ref()
                .is_some_and(|t| !t.is_empty())
        })
}

/// The pod with only its required constraints.
fn without_preferences(p: &Pod) -> Pod {
    let mut pod = p.clone();
    pod.preferred_affinity.clear();
    pod.preferred_anti_affinity.clear();
    pod.spread.retain(|s| s.hard);
    if let Some(na) = pod.node_affinity.as_mut() {
        na.preferred_during_scheduling_ignored_during_execution = None;
    }
    pod
}

/// Removes the heaviest term (first among equals), as upstream's stable sort then `[1:]`.
fn remove_heaviest(terms: &mut Vec<crate::engine::pod::AffinityTerm>) -> bool {
    let Some(max) = terms.iter().map(|t| t.weight).max() else {
        return false;
    };
    if let Some(i) = terms.iter().position(|t| t.weight == max) {
        terms.remove(i);
    }
    true
}
