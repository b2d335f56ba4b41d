package sync

import (
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/render"
)

// desired is the plan's outcome as the renderers take it (package render): everything they need, as
// data, and nothing they could decide from.
func (p *plan) desired() *render.Desired {
	f := p.f
	d := p.templateInput()
	d.Template.AgentTLS = p.agentKeepsTLS()
	d.Template.Hash = p.hash
	d.Template.SwitchAnnotation = p.tlsSw.switchAnnotation()
	d.Replicas, d.Partition = p.replicas, p.partition
	d.Live = f.sts
	if n := max(p.staticN, f.staticRecord); n > 0 {
		d.Bootstrap = api.StaticBootstrap(n)
	}
	d.PDBSize = p.pdbSize()
	for _, i := range sortedKeys(p.leases) {
		in := *p.leases[i]
		in.Renewal = p.renewalMark()
		if p.auth != nil {
			in.Auth = p.auth.Hash
		}
		d.Leases = append(d.Leases, render.MemberLease{Ordinal: i, Intent: in})
	}
	d.Config = render.Config{
		Bootstrapped:    f.bootstrapped,
		ClusterID:       f.clusterID,
		Running:         runningRecord(f.running),
		Formed:          f.formed || p.formedNow(),
		RollingTo:       p.rollingTo,
		DefragNowDone:   p.defragNowDone(),
		RestoreInPlace:  p.inPlaceRecordJSON(),
		RetiredClusters: p.retiredClusters(),
	}
	d.SpecRecord = p.userSpec
	if p.space.quota > p.space.specQuota {
		d.Config.SpaceQuota = strconv.FormatInt(p.space.quota, 10)
	}
	if p.space.storage != nil {
		d.Config.SpaceStorage = p.space.storage.String()
	}
	if p.spec.Backup != nil {
		d.Backup = &render.Backup{
			Schedule:  p.spec.Backup.Schedule != "" && f.obs.CronJobsDeclared,
			Suspended: p.restoring, // the members are down on purpose (inplace.go): a run would only fail
			Runs:      p.backupRuns(),
			Writer:    p.writerWanted() == "",
		}
	}
	d.NetworkPolicy = p.spec.Network.PolicyOn() && f.obs.NetworkPoliciesDeclared
	d.Auth = p.auth
	d.Jobs = p.jobs
	return d
}

// templateInput is what the pod template is rendered from: the decision hashes it before the rest of
// the outcome is known.
func (p *plan) templateInput() *render.Desired {
	d := &render.Desired{
		Names: p.names, ClusterUID: p.f.clusterUID, Spec: p.spec,
		Image: p.opts.Image, ImagePullPolicy: p.opts.ImagePullPolicy,
	}
	d.Template.TLS = p.renderTLS()
	if p.tlsSw.mode == tlsTransition {
		d.Template.Transition = p.tlsSw.from
	}
	return d
}

// pdbSize is the size the PDB's quorum budget is computed on (docs/design/10-status.md §10.3): the
// larger of the current voters and the target, so that a scale step never weakens it.
func (p *plan) pdbSize() int {
	size := p.target()
	if voters, _ := p.f.voters(); voters > size {
		size = voters
	}
	if p.f.unionVoters > size {
		size = p.f.unionVoters
	}
	return size
}

// backupRuns are the on-demand backup Jobs: the one of the etcd.io/backup-now token asked for (kept while
// the annotation holds it: one Job, hence one backup, per token; a finished one stays, its outcome is
// the status), and an earlier token's still running, kept until it finishes (a new token must not
// kill a backup half-way: its snapshot would be left without a manifest).
func (p *plan) backupRuns() []render.BackupRun {
	n := p.names
	var runs []render.BackupRun
	token := p.backupToken()
	if token != "" {
		runs = append(runs, render.BackupRun{Name: n.BackupJob(token), Token: token})
	}
	for _, name := range sortedKeys(p.f.obs.Jobs) {
		j := p.f.obs.Jobs[name]
		old := jobArg(j, "--token=")
		if old == "" || old == token || name != n.BackupJob(old) {
			continue
		}
		if state, _ := jobStatus(j); state == jobActive {
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

// voterEndpoints are the client URLs of the voters other than skip, for Jobs that talk to etcd.
func (p *plan) voterEndpoints(skip string) string {
	var eps []string
	for _, m := range p.f.members {
		if m.Learner || m.ID == skip {
			continue
		}
		if m.ordinal >= 0 {
			eps = append(eps, p.names.ClientURL(m.ordinal))
		} else if m.ClientURL != "" {
			eps = append(eps, m.ClientURL)
		}
	}
	if len(eps) == 0 {
		eps = []string{p.names.ClientEndpoint()}
	}
	return strings.Join(eps, ",")
}

// retiredClusters are the cluster IDs in-place restores replaced, as the agents get them: those of a
// restore not committed yet are still the live cluster's (a member restarting meanwhile must start on
// its data, and the restore may yet be withdrawn), so only the IDs of the restore before it count.
func (p *plan) retiredClusters() []string {
	r := p.inPlace
	if r.inFlight() && !r.Committed {
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
	case !p.hasSpec || p.spec.Backup == nil || p.spec.Backup.Continuous == nil:
		return "spec.backup.continuous is off"
	case !p.f.bootstrapped:
		return "the cluster has not formed: nothing to follow yet"
	case p.restoring:
		return "an in-place restore has the members down: the writer stops until it is done"
	}
	return ""
}
