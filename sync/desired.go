package sync

import (
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/render"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// desired is the plan's outcome as the renderers take it (package render): everything they need, as
// data, and nothing they could decide from.
func (p *plan) desired() *render.Desired {
	f := p.f
	d := p.templateInput()
	d.Template.AgentTLS = p.TLSSw.AgentKeepsTLS()
	d.Template.Hash = p.hash
	d.Template.SwitchAnnotation = p.TLSSw.SwitchAnnotation()
	d.Replicas, d.Partition = p.Replicas, p.partition
	d.Live = f.StatefulSet
	if n := max(p.staticN, f.StaticRecord); n > 0 {
		d.Bootstrap = api.StaticBootstrap(n)
	}
	d.PDBSize = p.pdbSize()
	for _, i := range p.leases.Ordinals() {
		in := *p.leases[i]
		in.Renewal = p.RenewalMark(p.f)
		if p.Auth != nil {
			in.Auth = p.Auth.Hash
		}
		d.Leases = append(d.Leases, render.MemberLease{Ordinal: i, Intent: in})
	}
	d.Config = render.Config{
		Bootstrapped:    f.Bootstrapped,
		ClusterID:       f.ClusterID,
		Running:         runningRecord(f.Running),
		Formed:          f.Formed || p.FormedNow(p.f),
		RollingTo:       p.rollingTo,
		DefragNowDone:   steps.DefragNowDone(p.f, p.Defrag),
		RestoreInPlace:  p.inPlaceRecordJSON(),
		RetiredClusters: p.retiredClusters(),
		StandbyPromoted: p.Standby.PromotedRecord(),
	}
	if p.Standby.On {
		d.Standby = &render.Standby{Applier: p.Standby.ApplierOff == "", Replicas: p.Standby.ApplierReplicas}
	}
	d.SpecRecord = p.userSpec
	if p.Space.Quota > p.Space.SpecQuota {
		d.Config.SpaceQuota = strconv.FormatInt(p.Space.Quota, 10)
	}
	if p.Space.Storage != nil {
		d.Config.SpaceStorage = p.Space.Storage.String()
	}
	if p.Spec.Backup != nil {
		d.Backup = &render.Backup{
			Schedule:  p.Spec.Backup.Schedule != "" && f.Observed.CronJobsDeclared,
			Suspended: p.Restoring, // the members are down on purpose (inplace.go): a run would only fail
			Runs:      p.backupRuns(),
			Writer:    p.writerWanted() == "",
		}
	}
	d.NetworkPolicy = p.Spec.Network.PolicyOn() && f.Observed.NetworkPoliciesDeclared
	d.Auth = p.Auth
	d.Jobs = p.jobs
	return d
}

// templateInput is what the pod template is rendered from: the decision hashes it before the rest of
// the outcome is known.
func (p *plan) templateInput() *render.Desired {
	d := &render.Desired{
		Names: p.Names, ClusterUID: p.f.ClusterUID, Spec: p.Spec,
		Image: p.opts.Image, ImagePullPolicy: p.opts.ImagePullPolicy,
	}
	d.Template.TLS = p.TLSSw.RenderTLS(p.Spec.Security.TLS)
	if p.TLSSw.Mode == steps.TLSTransition {
		d.Template.Transition = p.TLSSw.From
	}
	return d
}

// pdbSize is the size the PDB's quorum budget is computed on (docs/design/10-status.md §10.3): the
// larger of the current voters and the target, so that a scale step never weakens it.
func (p *plan) pdbSize() int {
	size := p.Target()
	if voters, _ := p.f.Truth.Voters(); voters > size {
		size = voters
	}
	if p.f.Truth.UnionVoters > size {
		size = p.f.Truth.UnionVoters
	}
	return size
}

// backupRuns are the on-demand backup Jobs: the one of the etcd.io/backup-now token asked for (kept while
// the annotation holds it: one Job, hence one backup, per token; a finished one stays, its outcome is
// the status), and an earlier token's still running, kept until it finishes (a new token must not
// kill a backup half-way: its snapshot would be left without a manifest).
func (p *plan) backupRuns() []render.BackupRun {
	n := p.Names
	var runs []render.BackupRun
	token := steps.BackupToken(p.f)
	if token != "" {
		runs = append(runs, render.BackupRun{Name: n.BackupJob(token), Token: token})
	}
	for _, name := range sortedKeys(p.f.Observed.Jobs) {
		j := p.f.Observed.Jobs[name]
		old := jobArg(j, "--token=")
		if old == "" || old == token || name != n.BackupJob(old) {
			continue
		}
		if state, _ := facts.JobStatus(j); state == facts.JobActive {
			runs = append(runs, render.BackupRun{Name: name, Token: old})
		}
	}
	return runs
}

// jobArg is the value of a --flag= argument of a Job's container command, "" when absent.
func jobArg(j *batchv1.Job, prefix string) string {
	cs := j.Spec.Template.Spec.Containers
	if len(cs) == 0 {
		return ""
	}
	for _, a := range cs[0].Command {
		if v, ok := strings.CutPrefix(a, prefix); ok {
			return v
		}
	}
	return ""
}

// voterEndpoints are the client URLs of the voters other than skip (steps.VoterEndpoints).
func (p *plan) voterEndpoints(skip string) string { return steps.VoterEndpoints(p.f, p.Names, skip) }

// retiredClusters are the cluster IDs in-place restores replaced, as the agents get them: those of a
// restore not committed yet are still the live cluster's (a member restarting meanwhile must start on
// its data, and the restore may yet be withdrawn), so only the IDs of the restore before it count.
func (p *plan) retiredClusters() []string {
	r := p.InPlace
	if r.InFlight() && !r.Committed {
		r = r.Prior
	}
	if r == nil || len(r.Retired) == 0 {
		return nil
	}
	ids := slices.Clone(r.Retired)
	slices.Sort(ids)
	return ids
}

func runningRecord(vs []api.SemVer) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return strings.Join(out, " ")
}

// writerWanted says why the continuous backup writer is not to run ("" when it is): continuous backup
// off, nothing to follow before the cluster formed, nor while an in-place restore has it down. The
// same reason lets Metacontroller delete a writer that runs (deletions): it resumes its chain when it
// is rendered again.
func (p *plan) writerWanted() string {
	switch {
	case !p.HasSpec || p.Spec.Backup == nil || p.Spec.Backup.Continuous == nil:
		return "spec.backup.continuous is off"
	case !p.f.Bootstrapped:
		return "the cluster has not formed: nothing to follow yet"
	case p.Restoring:
		return "an in-place restore has the members down: the writer stops until it is done"
	}
	return ""
}
