package service

import (
	"context"

	"github.com/datajobs/datajobs/internal/job"
)

// NotificationsShown is how many of a job's last notification events its page and
// GET …/jobs/{job}/notifications list.
const NotificationsShown = 50

// JobNotifications returns the last events of the job name of team, newest first, with
// their deliveries; a job that does not exist is not found.
func (s *Service) JobNotifications(ctx context.Context, team, name string) ([]job.NotificationEvent, map[int64][]job.NotificationDelivery, error) {
	if _, err := s.store.GetJob(ctx, team, name); err != nil {
		return nil, nil, err
	}
	return s.store.JobNotifications(ctx, team, name, NotificationsShown)
}
