package facts

import (
	"fmt"
	"strings"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// The two specs a sync reads, each validated here and nowhere else: the one the hook recorded
// (readSpecRecord) and the one the parent asks for (checkCandidate). Which of them is in force is a
// decision (steps.ChooseSpec).

// Candidate is the parent's spec as judged against the record and the cluster: what steps.ChooseSpec
// may adopt.
type Candidate struct {
	// Spec: the parent's spec with the record's defaults (spec.paused cleared: a switch, not part of the
	// spec the children are rendered from).
	Spec api.ClusterSpec
	// Problems: why Spec cannot be adopted (validation, the change rules), none when it can.
	Problems []api.Problem
	// CertProblems: what is wrong with the user's TLS Secrets the pods would mount: Spec's when it is
	// valid, else the applied spec's when it names the same ones (only Secrets the request's spec
	// names are related).
	CertProblems []CertProblem
}

// Valid: the candidate passes validation and the change rules (its TLS Secrets aside).
func (c *Candidate) Valid() bool { return len(c.Problems) == 0 }

// readSpecRecord reads the spec the hook recorded (ConfigMap spec.json). The record is an input like
// any other: the namespace's editors can write the ConfigMap. It is rendered from only if it passes the
// validation the parent's spec passes (Validate: applied); one that does not is named, and nothing it
// says is rendered: the hook adopts the parent's spec if that is valid against the record (recorded:
// ValidateChange, defaults) and no step is in flight, else it answers the children unchanged. The next
// answer records the spec in force again. Before, a record with --force-new-cluster in its options, or
// a size of 100000, was rendered whenever the parent's spec was invalid or paused.
func (f *Facts) readSpecRecord(s string) (applied, recorded *api.ClusterSpec) {
	var spec api.ClusterSpec
	if err := wire.Unmarshal([]byte(s), &spec); err != nil {
		f.Distrusted = append(f.Distrusted, fmt.Sprintf("ConfigMap %s key %s is ignored: %v", f.Names.ConfigMap(), api.ConfigKeySpec, err))
		return nil, nil
	}
	if spec.Security.TLS.Enabled == nil {
		// Recorded before TLS existed: that cluster runs without it.
		spec.Security.TLS.Enabled = new(false)
	}
	if spec.Network.Policy == nil {
		// Recorded before the NetworkPolicy existed: its clients may come from anywhere.
		spec.Network.Policy = new(false)
	}
	spec = api.Defaulted(spec)
	if ps := api.Validate(f.Parent.Name, spec); len(ps) > 0 {
		msgs := make([]string, 0, len(ps))
		for _, p := range ps {
			msgs = append(msgs, p.Message)
		}
		f.Distrusted = append(f.Distrusted, fmt.Sprintf("ConfigMap %s key %s is ignored: the recorded spec fails validation (%s)",
			f.Names.ConfigMap(), api.ConfigKeySpec, strings.Join(msgs, "; ")))
		return nil, &spec
	}
	return &spec, &spec
}

// checkCandidate validates the parent's spec: on its own (api.Validate), as a change from the record
// (api.ValidateChange against what runs), and against what the agents report (auth still enforced, a TLS
// switch under way).
func (f *Facts) checkCandidate() Candidate {
	// Defaults and the change rules come from the record even when it is not rendered from (recorded):
	// a cluster an older hook recorded under looser rules still runs what it says.
	c := Candidate{Spec: api.Defaulted(api.WithAppliedDefaults(f.Parent.Spec, f.Recorded))}
	c.Spec.Paused = false
	c.Problems = api.Validate(f.Names.Cluster, c.Spec)
	if msg := api.StandbyOwnFolder(f.Names, c.Spec); msg != "" {
		// The namespace is not in the spec, so CEL cannot see that a standby follows its own folder.
		c.Problems = append(c.Problems, api.Problem{Reason: "InvalidStandby", Message: msg})
	}
	if f.Observed.SpecError != "" {
		c.Problems = append([]api.Problem{{Reason: "SpecDoesNotDecode", Message: "spec: " + f.Observed.SpecError}}, c.Problems...)
	}
	if len(c.Problems) == 0 {
		c.Problems = api.ValidateChange(f.Recorded, c.Spec, f.Running, f.ImageVersions, f.StorageFloor())
	}
	if len(c.Problems) == 0 {
		c.Problems = authRemovalRefused(f.Recorded, c.Spec, f.AuthReport())
	}
	if len(c.Problems) == 0 && f.Recorded != nil && !sameTLSSecretNames(f.Recorded.Security.TLS, c.Spec.Security.TLS) && f.TLSSwitchSeen() {
		// Members still serve the certificates of the Secrets they started on: another Secret can mean
		// another CA, which peers on TLS would refuse (docs/design/14-tls.md §14.8).
		c.Problems = append(c.Problems, api.Problem{Reason: "TLSSecretChange", Message: "spec.security.tls peer/client secretName cannot change while TLS is being switched (status.tls.switch): set them back, and change them once the switch is over"})
	}
	switch {
	case c.Valid():
		c.CertProblems = f.checkTLSSecrets(f.secretsToCheck(c.Spec))
	case f.Applied != nil && sameTLSSecrets(*f.Applied, c.Spec):
		c.CertProblems = f.checkTLSSecrets(f.secretsToCheck(*f.Applied))
	}
	return c
}

// authRemovalRefused refuses removing spec.auth while the leader's agent reports etcd enforcing
// authentication (rep), even though the recorded spec already says enabled: false: api.ValidateChange
// checks only the record, and the agents apply enabled: false a look later. Once auth.json is gone no
// agent disables auth (etcd's auth is left as it is), and the Jobs fall back to the shared client
// Secret, which is no etcd user (docs/design/20-auth.md §20.6). Without a report nothing is known, and
// nothing refused.
func authRemovalRefused(recorded *api.ClusterSpec, next api.ClusterSpec, rep *api.AuthReport) []api.Problem {
	if recorded == nil || recorded.Auth == nil || next.Auth != nil || rep == nil || !rep.Enabled {
		return nil
	}
	return []api.Problem{{Reason: "InvalidAuth", Message: "spec.auth cannot be removed while etcd still enforces authentication (status.auth.enabled): the leader's agent has not applied enabled: false yet; remove spec.auth once it has"}}
}
