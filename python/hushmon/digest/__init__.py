"""The job digest: what a job's monitoring data says about its scalability."""
