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

func TestOwnAlarm(t *testing.T) {
	alarms := []string{"CORRUPT@1", api.AlarmNoSpace + "@" + api.FormatID(0xabc)}
	require.True(t, ownAlarm(alarms, 0xabc))
	require.False(t, ownAlarm(alarms, 1), "another alarm type of this member")
	require.False(t, ownAlarm(nil, 0xabc))
}
