package api

import "fmt"

// validateDefrag checks spec.maintenance.defrag (after Defaulted).
func validateDefrag(s ClusterSpec) []Problem {
	d := s.Maintenance.Defrag
	if d == nil {
		return nil
	}
	var ps []Problem
	if d.Schedule == "" {
		ps = append(ps, Problem{"InvalidDefrag", "spec.maintenance.defrag.schedule is required (a cron schedule, UTC; remove defrag for none)"})
	} else if msg := ScheduleProblem(d.Schedule); msg != "" {
		ps = append(ps, Problem{"InvalidDefrag", fmt.Sprintf("spec.maintenance.defrag.schedule %q: %s", d.Schedule, msg)})
	}
	if m := d.MinFreePercent; m != nil && (*m < 1 || *m > 100) {
		ps = append(ps, Problem{"InvalidDefrag", fmt.Sprintf("spec.maintenance.defrag.minFreePercent %d is outside 1..100", *m)})
	}
	return ps
}
