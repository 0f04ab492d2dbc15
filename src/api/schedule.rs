//! Cron schedules of disruption budgets.
