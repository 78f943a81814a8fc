/** A gcloud configuration for tests: the real `gcloud` pointed at a fake API on loopback. */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Writes a gcloud configuration directory (what `CLOUDSDK_CONFIG` names) as the INI files
 * `gcloud config set` would write: the TPU endpoint overridden, no credentials, no prompts, no
 * update checks (prompts are the client's to turn off), usage reports, metadata-server probes or log files.
 */
export async function writeGcloudConfig(dir: string, project: string, tpuEndpoint: string): Promise<void> {
  await mkdir(join(dir, 'configurations'), { recursive: true });
  await writeFile(join(dir, 'active_config'), 'default');
  await writeFile(
    join(dir, 'configurations', 'config_default'),
    [
      '[core]',
      `project = ${project}`,
      'disable_usage_reporting = true',
      'check_gce_metadata = false',
      'disable_file_logging = true',
      '[auth]',
      'disable_credentials = true',
      '[component_manager]',
      'disable_update_check = true',
      '[survey]',
      'disable_prompts = true',
      '[api_endpoint_overrides]',
      `tpu = ${tpuEndpoint}`,
      '',
    ].join('\n'),
  );
}
