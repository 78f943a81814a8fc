/**
 * Runs s3rver (an S3-protocol server) in this process: started by `startS3` as a child under
 * `node --openssl-legacy-provider` (without it every paged ListObjectsV2 answers 500).
 * argv: PORT DIR BUCKET. Prints "ready" when listening.
 */
import S3rver from 's3rver';

const [port, directory, bucket] = process.argv.slice(2);
const server = new S3rver({
  port: Number(port),
  address: '127.0.0.1',
  directory: directory!,
  silent: true,
  configureBuckets: [{ name: bucket!, configs: [] }],
});
await server.run();
console.log('ready');
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
