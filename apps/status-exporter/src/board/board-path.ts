/** Where the exporter serves the queue board (README "Status": the queue board). */
export const BOARD_PATH = '/queues';
