package steps

import (
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// KeepJobs keeps a remove Job while its member is still listed, releases it once the member is gone,
// and keeps every Job while nothing can be judged (no cluster, or no member list).
func TestKeepJobs(t *testing.T) {
	job := func(name string, attempt int, state facts.JobState) *facts.Job {
		return &facts.Job{Job: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}}, Attempt: attempt, State: state}
	}
	member := &facts.Member{Member: api.Member{ID: "a1"}, Healthy: true}
	for _, tc := range []struct {
		name         string
		bootstrapped bool
		members      []*facts.Member
		jobs         []*facts.Job
		carried      []string
		released     []string
	}{
		{"succeeded, member gone: released", true, []*facts.Member{}, []*facts.Job{job("rm-1", 1, facts.JobSucceeded)}, nil, []string{"rm-1"}},
		{"succeeded, member listed: kept", true, []*facts.Member{member}, []*facts.Job{job("rm-1", 1, facts.JobSucceeded)}, []string{"rm-1"}, nil},
		{"retry running: the failure before it kept", true, []*facts.Member{member},
			[]*facts.Job{job("rm-1", 1, facts.JobFailed), job("rm-2", 2, facts.JobFailed), job("rm-3", 3, facts.JobActive)}, []string{"rm-2", "rm-3"}, []string{"rm-1"}},
		{"not bootstrapped: kept", false, []*facts.Member{}, []*facts.Job{job("rm-1", 1, facts.JobSucceeded)}, []string{"rm-1"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &facts.Facts{Bootstrapped: tc.bootstrapped, Truth: facts.TruthOf(tc.members), RemoveJobs: map[string][]*facts.Job{"a1": tc.jobs}}
			d := KeepJobs(f, JobsInput{})
			var carried, released []string
			for _, j := range d.Carried {
				carried = append(carried, j.Name)
			}
			for _, r := range d.Released {
				released = append(released, r.Name)
			}
			require.Equal(t, tc.carried, carried)
			require.Equal(t, tc.released, released)
		})
	}
}
