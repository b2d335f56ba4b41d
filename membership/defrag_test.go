package membership

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

// The agent reads the quota etcd runs with from etcd's own command line, as the hook rendered it.
func TestQuotaOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		command []string
		want    int64
	}{
		{"unset: etcd's default", []string{"etcd", "--name=m0"}, api.DefaultQuotaBackendBytes},
		{"flag=value", []string{"etcd", "--quota-backend-bytes=16777216"}, 16 << 20},
		{"flag value", []string{"etcd", "--quota-backend-bytes", "8388608"}, 8 << 20},
		{"0: etcd's default", []string{"etcd", "--quota-backend-bytes=0"}, api.DefaultQuotaBackendBytes},
		{"negative: no quota", []string{"etcd", "--quota-backend-bytes=-1"}, 0},
		{"not a number", []string{"etcd", "--quota-backend-bytes=8Gi"}, 0},
	} {
		require.Equal(t, tc.want, quotaOf(tc.command), tc.name)
	}
}

// The revisions a revision compactor keeps, read from the agent's etcd flags (either flag form, the last
// one counting); none under periodic compaction or with a retention that is not a count.
func TestRevisionRetention(t *testing.T) {
	for _, tc := range []struct {
		name    string
		command []string
		keep    int64
		ok      bool
	}{
		{"revision", []string{"etcd", "--auto-compaction-mode=revision", "--auto-compaction-retention=1000"}, 1000, true},
		{"flag value", []string{"etcd", "--auto-compaction-mode", "revision", "--auto-compaction-retention", "50"}, 50, true},
		{"the last one counts", []string{"etcd", "--auto-compaction-mode=periodic", "--auto-compaction-mode=revision", "--auto-compaction-retention=7"}, 7, true},
		{"periodic", []string{"etcd", "--auto-compaction-mode=periodic", "--auto-compaction-retention=1h"}, 0, false},
		{"no mode", []string{"etcd", "--auto-compaction-retention=1000"}, 0, false},
		{"zero", []string{"etcd", "--auto-compaction-mode=revision", "--auto-compaction-retention=0"}, 0, false},
	} {
		keep, ok := revisionRetention(tc.command)
		require.Equal(t, tc.ok, ok, tc.name)
		if ok {
			require.Equal(t, tc.keep, keep, tc.name)
		}
	}
}

func TestOwnAlarm(t *testing.T) {
	alarms := []string{"CORRUPT@1", api.AlarmNoSpace + "@" + api.FormatID(0xabc)}
	require.True(t, ownAlarm(alarms, 0xabc))
	require.False(t, ownAlarm(alarms, 1), "another alarm type of this member")
	require.False(t, ownAlarm(nil, 0xabc))
}

// Sizes are rewritten on a significant move, and whenever the file crosses the quota line or the space
// pass's judgement flips, however little: the hook's view of both must be the agent's.
func TestKeepSizes(t *testing.T) {
	const quota = 2 << 30 // the line is at 1.875 GiB
	rep := func(size, inUse int64) api.Report { return api.Report{DBSize: size, DBSizeInUse: inUse} }
	for _, tc := range []struct {
		name      string
		last, now api.Report
		keep      bool
	}{
		{"unchanged", rep(100<<20, 50<<20), rep(100<<20, 50<<20), true},
		{"a small move", rep(100<<20, 50<<20), rep(101<<20, 50<<20), true},
		{"a significant move", rep(100<<20, 50<<20), rep(120<<20, 50<<20), false},
		{"below the line after a small defragmentation (40 MiB of 1.9 GiB)", rep(1946<<20, 1900<<20), rep(1906<<20, 1900<<20), false},
		{"above the line by a few pages", rep(1919<<20, 1900<<20), rep(1921<<20, 1900<<20), false},
		{"both above the line", rep(1930<<20, 1900<<20), rep(1931<<20, 1900<<20), true},
		// The space line (70%: 1433.6 MiB) with 256 MiB (an eighth of the quota) to give back.
		{"a space defragmentation stops being worth it", rep(1440<<20, 1180<<20), rep(1440<<20, 1185<<20), false},
		{"a file crosses the space line", rep(1433<<20, 1100<<20), rep(1434<<20, 1100<<20), false},
		{"past the space line, both worth it", rep(1440<<20, 1100<<20), rep(1441<<20, 1100<<20), true},
	} {
		require.Equal(t, tc.keep, keepSizes(tc.last, tc.now, quota, api.DefaultSpaceActAtPercent), tc.name)
	}
}

// The alarms of members not in the list, by ID; none without a list (a learner cannot tell).
func TestOrphanNoSpace(t *testing.T) {
	members := []api.Member{{ID: api.FormatID(1)}, {ID: api.FormatID(2)}}
	alarms := []string{api.AlarmNoSpace + "@" + api.FormatID(2), api.AlarmNoSpace + "@" + api.FormatID(9), "CORRUPT@" + api.FormatID(8)}
	require.Equal(t, []uint64{9}, orphanNoSpace(alarms, members))
	require.Nil(t, orphanNoSpace(alarms, nil))
	require.Nil(t, orphanNoSpace(nil, members))
}
